package config

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFlagWinsOverEnvironment(t *testing.T) {
	env := []string{
		"OUTBOX_CDC_POSTGRES_URL=postgres://env@h/db",
		"OUTBOX_CDC_KAFKA_BROKERS=a:9092, b:9092",
		"OUTBOX_CDC_SLOT=from_env",
		"OUTBOX_CDC_BATCH_TIMEOUT=2ms",
		"UNRELATED=1",
	}
	c, err := Parse([]string{"--slot", "from_flag", "--table", "app.events"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Slot != "from_flag" || c.PostgresURL != "postgres://env@h/db" || c.BatchTimeout != 2*time.Millisecond {
		t.Errorf("slot %q url %q batch timeout %s", c.Slot, c.PostgresURL, c.BatchTimeout)
	}
	if strings.Join(c.KafkaBrokers, ",") != "a:9092,b:9092" || c.Schema != "app" || c.Table != "events" {
		t.Errorf("brokers %v table %s", c.KafkaBrokers, c.QualifiedTable())
	}
	if c.Columns.Payload != "payload" || c.Topic != "outbox.event.{aggregate_type}" || c.Publication != "outbox_cdc" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestUsageErrorsNameTheFix(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{nil, nil, "--postgres-url (or OUTBOX_CDC_POSTGRES_URL) is required"},
		{[]string{"--postgres-url", "x"}, nil, "--kafka-brokers (or OUTBOX_CDC_KAFKA_BROKERS) is required"},
		{append(base, "--slot", "Bad-Name"), nil, "--slot \"Bad-Name\""},
		{append(base, "--log-format", "xml"), nil, "want text or json"},
		{append(base, "--column-payload", ""), nil, "--column-payload must name a column"},
		{append(base, "--nope"), nil, "flag provided but not defined: -nope"},
		{base, []string{"OUTBOX_CDC_MAX_IN_FLIGHT=many"}, "OUTBOX_CDC_MAX_IN_FLIGHT=\"many\""},
		{append(base, "extra"), nil, "unexpected argument \"extra\""},
	}
	for _, tt := range tests {
		_, err := Parse(tt.args, tt.env, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q, %q) = %v, want a usage error containing %q", tt.args, tt.env, err, tt.want)
		}
	}
}

func TestHelpListsEnvironmentNames(t *testing.T) {
	var out strings.Builder
	if _, err := Parse([]string{"--help"}, nil, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--kafka-brokers (env OUTBOX_CDC_KAFKA_BROKERS", "--column-headers (env OUTBOX_CDC_COLUMN_HEADERS, default \"headers\")"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
