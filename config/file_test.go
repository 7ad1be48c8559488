package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPrecedence: a flag wins over its variable, which wins over the file,
// which wins over the default; a table's own key wins over all of them.
func TestPrecedence(t *testing.T) {
	path := writeFile(t, "c.yaml", `
postgres_url: postgres://file@h/db
kafka_brokers: [f1:9092, f2:9092]
slot: from_file
publication: from_file
max_in_flight: 7
batch_timeout: 3ms
kafka_compression: zstd
topic_config: {retention.ms: 1000}
mark: ["done=true"]
cleanup: mark
columns: {payload: body}
tables:
  - table: billing.outbox
    columns: {payload: data}
    mark: []
    mark_dead: ["failed=true"]
  - table: public.outbox
`)
	env := []string{"OUTBOX_CDC_SLOT=from_env", "OUTBOX_CDC_PUBLICATION=from_env", "OUTBOX_CDC_MAX_IN_FLIGHT=8"}
	c, err := Parse(CmdRun, []string{"--config", path, "--slot", "from_flag"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Relay
	if r.Slot.Name != "from_flag" || r.Slot.Publication != "from_env" || r.Stream.MaxInFlight != 8 || r.Producer.BatchTimeout != 3*time.Millisecond ||
		r.Producer.Compression != sink.CompressionZstd || r.PostgresURL != "postgres://file@h/db" || strings.Join(r.Kafka.Brokers, ",") != "f1:9092,f2:9092" ||
		r.Cleanup != cleanup.Mark || r.Stream.DrainTimeout != 30*time.Second {
		t.Errorf("flag > env > file > default: %+v", r)
	}
	if c.TableNames() != "billing.outbox,public.outbox" {
		t.Fatalf("tables %s: without --table, the file's replace the default", c.TableNames())
	}
	billing, pub := r.Tables[0], r.Tables[1]
	if billing.Columns.Payload != "data" || len(billing.Mark) != 0 || columns(billing.MarkDead) != "failed" || billing.Route.Spec.Configs["retention.ms"] != "1000" {
		t.Errorf("billing.outbox: %+v", billing)
	}
	if pub.Columns.Payload != "body" || columns(pub.Mark) != "done" || fmt.Sprint(r.Defaults.Route.Spec.Configs) != "map[retention.ms:1000]" {
		t.Errorf("public.outbox: %+v, topics %+v", pub, r.Topics)
	}
	// The environment's list replaces the file's, as the flag's replaces
	// the environment's.
	c, err = Parse(CmdRun, []string{"--config", path}, []string{"OUTBOX_CDC_MARK=sent=true,n=1", "OUTBOX_CDC_TOPIC_CONFIG=a=b"}, io.Discard)
	if err != nil || columns(c.Relay.Tables[1].Mark) != "sent|n" || fmt.Sprint(c.Relay.Defaults.Route.Spec.Configs) != "map[a:b]" {
		t.Errorf("env over file: %v, %+v", err, c.Relay.Tables)
	}
}

// TestConfigFileRefusesWhatItDoesNotKnow: a mistake in the file names the
// file, the key and its line, and suggests the nearest key.
func TestConfigFileRefusesWhatItDoesNotKnow(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	for _, tt := range []struct{ file, want string }{
		{"max_inflight: 5\n", `c.yaml: unknown key "max_inflight" (line 1); did you mean "max_in_flight"?`},
		{"tables:\n  - table: a.b\n    slot: x\n", `c.yaml: tables[0] (a.b): unknown key "slot" (line 3)`},
		{"tables:\n  - topic: x\n", "tables[0] (line 2) has no table"},
		{"max_in_flight: many\n", "c.yaml: max_in_flight (line 1): parse error"},
		{"columns: [id]\n", "columns (line 1): want a mapping"},
		{"kafka_brokers: {a: b}\n", "kafka_brokers (line 1): want a value or a list of values, not a mapping"},
		{"- a\n", "want a mapping of settings at the top"},
		{"config: other.yaml\n", `unknown key "config"`},
		{"json: true\n", `unknown key "json"`},
	} {
		path := writeFile(t, "c.yaml", tt.file)
		_, err := Parse(CmdRun, append(base, "--config", path), nil, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want a usage error containing %q", tt.file, err, tt.want)
		}
	}
	// The config file from the environment, and a key another command has
	// no use for: accepted.
	path := writeFile(t, "c.yaml", "postgres_url: postgres://x\nkafka_brokers: k:1\nmax_in_flight: 5\n")
	for _, cmd := range Commands() {
		if _, err := Parse(cmd, nil, []string{"OUTBOX_CDC_CONFIG=" + path}, io.Discard); err != nil {
			t.Errorf("%s with the file from OUTBOX_CDC_CONFIG: %v", cmd, err)
		}
	}
}

// TestUnknownVariablesWarn: a misspelt OUTBOX_CDC_ variable is a warning
// naming the nearest known one, not an error; known ones, and those of
// another command, are not.
func TestUnknownVariablesWarn(t *testing.T) {
	env := []string{"OUTBOX_CDC_POSTGRES_URL=postgres://x", "OUTBOX_CDC_KAFKA_BROKERS=k:1", "OUTBOX_CDC_MAX_INFLIGHT=5",
		"OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE_=x", "OUTBOX_CDC_DRY_RUN=true", "OUTBOX_CDC_CPUPROFILE=/tmp/p", "OUTBOX_CDC_ZZZ=1"}
	c, err := Parse(CmdRun, nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE_ is set, but no outbox-cdc setting has that name; it is ignored (did you mean OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE?)",
		"OUTBOX_CDC_MAX_INFLIGHT is set, but no outbox-cdc setting has that name; it is ignored (did you mean OUTBOX_CDC_MAX_IN_FLIGHT?)",
		"OUTBOX_CDC_ZZZ is set, but no outbox-cdc setting has that name; it is ignored",
	}
	if strings.Join(c.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(c.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

// TestCommandsShareRunsFlags: a run command line works for check, setup
// and status, which ignore what they have no use for; their own flags
// stay theirs.
func TestCommandsShareRunsFlags(t *testing.T) {
	args := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--max-in-flight", "5", "--http-addr", ":1",
		"--envelope", "cloudevents", "--batch-timeout", "1ms", "--slot", "s1"}
	for _, cmd := range []string{CmdRun, CmdCheck, CmdSetup, CmdStatus} {
		c, err := Parse(cmd, args, nil, io.Discard)
		if err != nil || c.Relay.Slot.Name != "s1" || c.Relay.Stream.MaxInFlight != 5 {
			t.Errorf("%s with run's flags: %v", cmd, err)
		}
	}
	// status ignores a tuning it has no use for; run refuses it.
	bad := append(args, "--max-in-flight", "0")
	if _, err := Parse(CmdStatus, bad, nil, io.Discard); err != nil {
		t.Errorf("status --max-in-flight 0: %v", err)
	}
	if _, err := Parse(CmdRun, bad, nil, io.Discard); err == nil || err.Error() != "--max-in-flight 0: want at least 1" {
		t.Errorf("run --max-in-flight 0: %v", err)
	}
	c, err := Parse(CmdCheck, append(args, "--offline"), nil, io.Discard)
	if err != nil || !c.Offline {
		t.Errorf("check --offline: %v, %v", err, c.Offline)
	}
	if _, err := Parse(CmdRun, append(args, "--offline"), nil, io.Discard); err == nil {
		t.Error("run accepted --offline")
	}
	if _, err := Parse("chekc", nil, nil, io.Discard); err == nil || !strings.Contains(err.Error(), `did you mean "check"?`) {
		t.Errorf("a mistyped command: %v", err)
	}
}

// TestHelpIsGroupedAndWrapped: every line of every command's help fits
// in 80 columns, each flag is under a heading, with its variable and
// default.
func TestHelpIsGroupedAndWrapped(t *testing.T) {
	for _, cmd := range Commands() {
		var out strings.Builder
		if _, err := Parse(cmd, []string{"--help"}, nil, &out); err == nil {
			t.Fatal("no ErrHelp")
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if len(l) > width {
				t.Errorf("%s --help: a line of %d columns: %s", cmd, len(l), l)
			}
		}
		if cmd == CmdRun {
			for _, want := range []string{"\nKafka:\n  --kafka-brokers (env OUTBOX_CDC_KAFKA_BROKERS, default \"\")\n",
				"\n  --kafka-tls-insecure-skip-verify\n      (env OUTBOX_CDC_KAFKA_TLS_INSECURE_SKIP_VERIFY, default \"false\")\n"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("run --help lacks %q", want)
				}
			}
		}
	}
}

// TestNullKeepsSetting: a key with no value (key: or key: ~), as templates
// often write, leaves the setting as the flags or the defaults made it:
// before, it cleared the inherited --backfill-where, and that table's
// backfill never ran.
func TestNullKeepsSetting(t *testing.T) {
	path := writeFile(t, "c.yaml", `
topic_regex:
tables:
  - table: public.a
    backfill_where:
    topic_config: ~
    header_columns:
`)
	args := []string{"--config", path, "--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--table", "public.a",
		"--backfill-where", "status = 'pending'", "--topic-regex", "x(.*)", "--topic-replacement", "y$1",
		"--topic-config", "min.insync.replicas=2", "--header-column", "tenant_id"}
	c, err := Parse(CmdRun, args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Relay.Tables[0]
	if a.Backfill.Where != "status = 'pending'" || a.Route.Regex != "x(.*)" || a.Route.Spec.Configs["min.insync.replicas"] != "2" ||
		len(a.Columns.HeaderColumns) != 1 || c.Relay.Defaults.Route.Regex != "x(.*)" {
		t.Errorf("a null key changed a setting: table %+v, defaults route %+v", a, c.Relay.Defaults.Route)
	}
}
