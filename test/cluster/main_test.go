//go:build cluster

// Package cluster runs outbox-cdc against a three-node Kafka cluster
// (scripts/kafka-cluster.sh: replication factor 3, min.insync.replicas=2,
// auto-creation off) under broker faults: `make test-cluster`. The relay
// reaches each node through a loopback proxy, which the nodes advertise, so
// that a test can cut the network between them.
package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

var (
	pg      *testkit.Postgres
	kc      *testkit.KafkaCluster
	proxies []*testkit.Proxy
	brokers string // the proxies, comma-separated: what the relay is given
	direct  string // the nodes themselves, for the tests' own clients
	binary  string
)

func TestMain(m *testing.M) {
	testkit.Main(m, "cluster", "they need Postgres and a three-node Kafka cluster", runMain)
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
	binary = filepath.Join(tmp, "outbox-cdc")
	if err := testkit.BuildRelay(binary, true); err != nil {
		return fail("build", err)
	}
	if pg, err = testkit.StartPostgres(); err != nil {
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
	if kc, err = testkit.StartKafkaCluster(advertise...); err != nil {
		return fail("start the three-node kafka cluster (needs java and mvn; see scripts/kafka-cluster.sh)", err)
	}
	defer kc.Stop()
	defer testkit.StopBeforeTimeout(kc.Stop, pg.Stop)()
	var direct_ []string
	for i, ln := range lns {
		target := fmt.Sprintf("127.0.0.1:%d", kc.Ports[i])
		proxies = append(proxies, testkit.ServeProxy(ln, target))
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
