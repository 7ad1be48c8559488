package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTopicAllowAndMaxTopics: --topic-allow is each table's default, a
// table of the --config file may have its own, a regex that does not
// compile and a negative cap are usage errors, and the cap defaults to
// 1000.
func TestTopicAllowAndMaxTopics(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	path := filepath.Join(t.TempDir(), "tables.yaml")
	if err := os.WriteFile(path, []byte("tables:\n  - table: billing.outbox\n    topic_allow: 'billing\\.(invoice|payment)'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse(CmdRun, append(base, "--table", "public.outbox", "--config", path, "--topic-allow", `outbox\.event\.\w+`), nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Relay.Topics.Max != 1000 || c.Relay.Defaults.Route.Allow != `outbox\.event\.\w+` {
		t.Errorf("max topics %d, allow %q", c.Relay.Topics.Max, c.Relay.Defaults.Route.Allow)
	}
	allow := map[string]string{}
	for _, tc := range c.Relay.Tables {
		allow[tc.Qualified()] = tc.Route.Allow
	}
	if allow["public.outbox"] != `outbox\.event\.\w+` || allow["billing.outbox"] != `billing\.(invoice|payment)` {
		t.Errorf("allow-lists by table: %v", allow)
	}
	if c, err = Parse(CmdRun, append(base, "--max-topics", "0"), nil, io.Discard); err != nil || c.Relay.Topics.Max != 0 {
		t.Errorf("--max-topics 0 (no cap): %v, %d", err, c.Relay.Topics.Max)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-topics", "-1"}, "--max-topics -1: want 0 (no cap) or more"},
		{[]string{"--topic-allow", "("}, `--topic-allow "("`},
		{[]string{"--table", "", "--topic-allow", "("}, `--topic-allow "("`},
	} {
		_, err := Parse(CmdRun, append(base, tt.args...), nil, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
}

// TestFixedTopicIsNotReserved: a fixed --topic (of messages, or of a
// table of the config file) that is the dead-letter topic, the
// checkpoint topic (in either delivery mode) or one of Kafka's __ topics
// is a usage error naming --topic: every event of it would be refused.
func TestFixedTopicIsNotReserved(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--table", "public.outbox"}
	path := filepath.Join(t.TempDir(), "tables.yaml")
	if err := os.WriteFile(path, []byte("tables:\n  - table: billing.outbox\n    topic: app.dlq\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", "outbox.dlq"}, "--topic outbox.dlq (table public.outbox): topic outbox.dlq is the dead-letter topic"},
		{[]string{"--topic", "outbox.dlq", "--on-invalid", "fail"}, "is the dead-letter topic"},
		{[]string{"--topic", "outbox_cdc.checkpoints"}, "is the checkpoint topic"},
		{[]string{"--topic", "ckpt", "--checkpoint-topic", "ckpt", "--delivery", "exactly-once"}, "--checkpoint-topic ckpt is also --topic"},
		{[]string{"--topic", "__consumer_offsets"}, "begins with __"},
		{[]string{"--config", path, "--dlq-topic", "app.dlq"}, "--topic app.dlq (table billing.outbox): topic app.dlq is the dead-letter topic"},
	} {
		_, err := Parse(CmdRun, append(base, tt.args...), nil, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Field != "topic" && ue.Field != "checkpoint-topic" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
	if _, err := Parse(CmdRun, append(base, "--topic", "outbox.dlq.v2"), nil, io.Discard); err != nil {
		t.Errorf("a fixed topic of its own: %v", err)
	}
}
