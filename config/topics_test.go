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
