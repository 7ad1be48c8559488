//go:build cluster

// Package cluster runs outbox-cdc against a three-node Kafka cluster
// (scripts/kafka-cluster.sh: replication factor 3, min.insync.replicas=2,
// auto-creation off) under broker faults: `make test-cluster`. The relay
// reaches each node through a loopback proxy, which the nodes advertise, so
// that a test can cut the network between them.
package cluster

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

var (
	pg      *harness.Postgres
	kc      *harness.KafkaCluster
	proxies []*harness.Proxy
	brokers string // the proxies, comma-separated: what the relay is given
	direct  string // the nodes themselves, for the tests' own clients
	binary  string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "cluster: %s: %v\n", what, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "outbox-cdc-cluster-")
	if err != nil {
		return fail("temp dir", err)
	}
	defer os.RemoveAll(tmp)
	root, err := harness.Root()
	if err != nil {
		return fail("find repository root", err)
	}
	binary = filepath.Join(tmp, "outbox-cdc")
	build := exec.Command("go", "build", "-race", "-o", binary, "./cmd/outbox-cdc")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fail("build outbox-cdc", err)
	}
	if pg, err = harness.StartPostgres(); err != nil {
		return fail("start postgres", err)
	}
	defer pg.Stop()
	// The proxies' ports first: the nodes advertise them.
	var lns []net.Listener
	var advertise []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fail("listen", err)
		}
		lns = append(lns, ln)
		advertise = append(advertise, ln.Addr().String())
	}
	if kc, err = harness.StartKafkaCluster(advertise...); err != nil {
		return fail("start the three-node kafka cluster (needs java and mvn; see scripts/kafka-cluster.sh)", err)
	}
	defer kc.Stop()
	defer harness.StopBeforeTimeout(kc.Stop, pg.Stop)()
	var direct_ []string
	for i, ln := range lns {
		target := fmt.Sprintf("127.0.0.1:%d", kc.Ports[i])
		proxies = append(proxies, harness.ServeProxy(ln, target))
		direct_ = append(direct_, target)
	}
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
	}()
	brokers, direct = strings.Join(advertise, ","), strings.Join(direct_, ",")
	fmt.Printf("cluster: postgres %s, kafka nodes %s (pids %v) behind proxies %s\n", pg.URL, direct, kc.PIDs, brokers)
	return m.Run()
}
