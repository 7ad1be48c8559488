package relay_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// The real servers of this package's tests and Example, started by TestMain.
var pgURL, kafkaBrokers string

func TestMain(m *testing.M) {
	testkit.Main(m, "relay", "the Example and the tests need Postgres and Kafka", runMain)
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
