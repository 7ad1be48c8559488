// Package integration runs outbox-cdc, as a process, against a real
// PostgreSQL cluster and a real Apache Kafka broker started for the package.
package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

var (
	pg         *harness.Postgres
	broker     *harness.Kafka
	binary     string // the outbox-cdc binary under test, built with -race
	fastBinary string // the same without -race, for the memory and volume tests
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: skipped in -short mode (they need Postgres and Kafka)")
		os.Exit(0)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "integration: %s: %v\n", what, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "outbox-cdc-it-")
	if err != nil {
		return fail("temp dir", err)
	}
	defer os.RemoveAll(tmp)
	binary = filepath.Join(tmp, "outbox-cdc")
	root, err := harness.Root()
	if err != nil {
		return fail("find repository root", err)
	}
	fastBinary = filepath.Join(tmp, "outbox-cdc-fast")
	for _, b := range [][]string{{"-race", "-o", binary}, {"-o", fastBinary}} {
		build := exec.Command("go", append(append([]string{"build"}, b...), "./cmd/outbox-cdc")...)
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fail("build outbox-cdc", err)
		}
	}

	start := time.Now()
	if pg, err = harness.StartPostgres(); err != nil {
		return fail("start postgres", err)
	}
	defer pg.Stop()
	if broker, err = harness.StartKafka(); err != nil {
		return fail("start kafka (needs java and mvn; see scripts/kafka.sh)", err)
	}
	defer broker.Stop()
	fmt.Printf("integration: postgres %s (pid %d), kafka %s (pid %d), up in %s\n",
		pg.URL, pg.PID, broker.Brokers, broker.PID, time.Since(start).Round(time.Millisecond))

	defer harness.StopBeforeTimeout(broker.Stop, pg.Stop)()
	return m.Run()
}
