package relay_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// The real servers of this package's tests and Example, started by TestMain.
var pgURL, kafkaBrokers string

// TestMain starts the servers, except in -short mode: there it runs the
// unit tests (most of this package's: decisions, kfake, fakes) and skips
// the Example and the tests that need Postgres and Kafka (needServers).
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		if f := flag.Lookup("test.skip"); f != nil && f.Value.String() == "" {
			if err := f.Value.Set("^Example"); err != nil {
				fmt.Fprintln(os.Stderr, "relay:", err)
				os.Exit(1)
			}
		}
		fmt.Println("relay: -short runs the unit tests only; the Example and the tests that need Postgres and Kafka are skipped")
		os.Exit(m.Run())
	}
	testkit.Main(m, "relay", "the Example and the tests need Postgres and Kafka", runMain)
}

// needServers skips t in -short mode, where TestMain starts no server.
func needServers(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and Kafka (skipped in -short mode)")
	}
}

func runMain(m *testing.M) int {
	servers, stop, err := testkit.StartServers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	defer stop()
	pgURL, kafkaBrokers = servers.Postgres.URL, servers.Kafka.Brokers
	return m.Run()
}
