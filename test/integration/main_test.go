// Package integration runs outbox-cdc, as a process, against a real
// PostgreSQL cluster and a real Apache Kafka broker started for the package.
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

var (
	pg         *testkit.Postgres
	broker     *testkit.Kafka
	binary     string // the outbox-cdc binary under test, built with -race
	fastBinary string // the same without -race, for the memory and volume tests
)

func TestMain(m *testing.M) {
	testkit.Main(m, "integration", "they need Postgres and Kafka", runMain)
}

func runMain(m *testing.M) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "outbox-cdc-it-")
	if err != nil {
		return fail(fmt.Errorf("temp dir: %w", err))
	}
	defer os.RemoveAll(tmp)
	binary, fastBinary = filepath.Join(tmp, "outbox-cdc"), filepath.Join(tmp, "outbox-cdc-fast")
	if err := testkit.BuildRelay(binary, true); err != nil {
		return fail(err)
	}
	if err := testkit.BuildRelay(fastBinary, false); err != nil {
		return fail(err)
	}

	start := time.Now()
	servers, stop, err := testkit.StartServers()
	if err != nil {
		return fail(err)
	}
	defer stop()
	pg, broker = servers.Postgres, servers.Kafka
	fmt.Printf("integration: postgres %s (pid %d), kafka %s (pid %d), up in %s\n",
		pg.URL, pg.PID, broker.Brokers, broker.PID, time.Since(start).Round(time.Millisecond))
	return m.Run()
}
