package config

import (
	"io"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/contract"
)

// TestContractFlags: --contracts and --contracts-unknown reach
// relay.Config from each source (config file keys are the flags' names),
// and dead-letter without a directory is refused, naming the flag.
func TestContractFlags(t *testing.T) {
	c := parseFile(t, map[string]any{"postgres_url": "postgres://x", "kafka_brokers": "k:1", "contracts": "schemas", "contracts_unknown": "dead-letter"})
	if got := c.Relay.Contracts; got.Dir != "schemas" || got.Unknown != contract.UnknownDeadLetter {
		t.Errorf("from the file: %+v", got)
	}
	c, err := Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}, []string{"OUTBOX_CDC_CONTRACTS=env-schemas"}, io.Discard)
	if err != nil || c.Relay.Contracts.Dir != "env-schemas" || c.Relay.Contracts.Unknown != contract.UnknownAllow {
		t.Errorf("from the environment: %+v, %v", c.Relay.Contracts, err)
	}
	_, err = Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--contracts-unknown", "dead-letter"}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--contracts-unknown=dead-letter needs --contracts") {
		t.Errorf("dead-letter without a directory: %v", err)
	}
}
