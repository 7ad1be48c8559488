package config

import (
	"io"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// TestAnalyticsSettings: --null-payload and --column-partition are table
// settings (a table of the file overrides the flags'), --timestamp a
// producer's; each defaults to what the relay did before them.
func TestAnalyticsSettings(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	c, err := Parse(CmdRun, base, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cols := c.Relay.Tables[0].Columns
	if cols.NullPayload != decode.NullPayloadDeadLetter || cols.Partition != "" || c.Relay.Producer.Timestamp != sink.TimestampColumn {
		t.Errorf("defaults: null payload %q, partition %q, timestamp %q; want dead-letter, none, column", cols.NullPayload, cols.Partition, c.Relay.Producer.Timestamp)
	}

	path := writeFile(t, "c.yaml", `
null_payload: tombstone
timestamp: commit
tables:
  - table: public.orders
    columns: {partition: shard}
  - table: public.audit
    null_payload: dead-letter
`)
	c, err = Parse(CmdRun, append(base, "--config", path), []string{"OUTBOX_CDC_COLUMN_PARTITION=part"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	orders, audit := c.Relay.Tables[0].Columns, c.Relay.Tables[1].Columns
	switch {
	case c.Relay.Producer.Timestamp != sink.TimestampCommit:
		t.Errorf("timestamp %q, want the file's commit", c.Relay.Producer.Timestamp)
	case orders.NullPayload != decode.NullPayloadTombstone || orders.Partition != "shard":
		t.Errorf("orders: null payload %q, partition %q; want tombstone (top level) and its own shard", orders.NullPayload, orders.Partition)
	case audit.NullPayload != decode.NullPayloadDeadLetter || audit.Partition != "part":
		t.Errorf("audit: null payload %q, partition %q; want its own dead-letter and the variable's part", audit.NullPayload, audit.Partition)
	}
}

// TestTombstonesNeedAKeyColumn: a table without a key column cannot have
// tombstones; said at start, naming the flag, not row by row.
func TestTombstonesNeedAKeyColumn(t *testing.T) {
	args := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--null-payload", "tombstone", "--column-aggregate-id", ""}
	_, err := Parse(CmdRun, args, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--null-payload") || !strings.Contains(err.Error(), "no key column") {
		t.Errorf("tombstones without a key column: %v, want refused naming --null-payload", err)
	}
	// With a key column and --null-key=allow it is accepted: keyless rows
	// are dead-lettered one by one (decode's TestNullPayloads).
	if _, err := Parse(CmdRun, append(args[:6], "--null-key", "allow"), nil, io.Discard); err != nil {
		t.Errorf("tombstones with --null-key=allow: %v", err)
	}
}
