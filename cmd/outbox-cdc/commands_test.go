package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/backfill"
)

// exec runs the command line args as main does, and returns its exit code,
// its standard output and its standard error.
func exec(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := mainExit(args, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestSetupPrint: setup --print without --postgres-url prints the SQL for a
// fresh database, and the topics to create, as it always has: operators
// paste it into migrations.
func TestSetupPrint(t *testing.T) {
	const (
		header = "-- outbox-cdc setup for public.outbox (publication outbox_cdc, slot outbox_cdc)\n"
		pub    = `CREATE PUBLICATION "outbox_cdc" FOR TABLE "public"."outbox" WITH (publish = 'insert');` + "\n"
		create = `SELECT pg_create_logical_replication_slot('outbox_cdc', 'pgoutput');` + "\n"
		role   = `-- the role, if it does not exist yet: CREATE ROLE "relay" WITH LOGIN REPLICATION PASSWORD '…';
ALTER ROLE "relay" WITH LOGIN REPLICATION;
GRANT USAGE ON SCHEMA "public" TO "relay";
`
		emit      = `GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO "relay";` + "\n"
		defaults  = "(partitions the broker's default, replication factor the broker's default)"
		specified = "(partitions 3, replication factor 2, retention.ms=1000)"
	)
	// The slot setup creates, recorded as known here, as run records it.
	slot := create + backfill.HealTableSQL("public") + ";\n" + backfill.RecordSlotSQL("public", "outbox_cdc") + "\n"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--table", "public.outbox"}, header + pub + slot},
		{[]string{"--table", "public.outbox,other.t2", "--role", "relay", "--cleanup", "mark", "--mark", "status='done'"},
			"-- outbox-cdc setup for public.outbox,other.t2 (publication outbox_cdc, slot outbox_cdc)\n" +
				`CREATE PUBLICATION "outbox_cdc" FOR TABLE "public"."outbox", "other"."t2" WITH (publish = 'insert');` + "\n" +
				role + `GRANT USAGE ON SCHEMA "other" TO "relay";` + "\n" + emit +
				`GRANT SELECT, UPDATE ON "public"."outbox", "other"."t2" TO "relay";` + "\n" + slot},
		{[]string{"--table", "public.outbox", "--role", "relay", "--backfill-where", "true", "--cleanup", "delete-after-publish",
			"--kafka-brokers", "127.0.0.1:1", "--topic", "fixed.topic"},
			header + pub + role + emit + `GRANT SELECT, DELETE ON "public"."outbox" TO "relay";` + "\n" +
				strings.Join(backfill.SetupSQL("public", "relay"), "\n") + "\n" +
				"-- kafka: create topic outbox.dlq " + defaults + " unless it exists\n" +
				"-- kafka: create topic fixed.topic " + defaults + " unless it exists\n"},
		{[]string{"--table", "public.outbox", "--kafka-brokers", "127.0.0.1:1", "--on-invalid", "fail", "--topic", "a.{aggregate_type}"},
			header + pub + slot},
		{[]string{"--table", "public.outbox", "--kafka-brokers", "127.0.0.1:1", "--topic-partitions", "3", "--topic-replication-factor", "2",
			"--topic-config", "retention.ms=1000", "--topic", "fixed"},
			header + pub + slot + "-- kafka: create topic outbox.dlq " + specified + " unless it exists\n" +
				"-- kafka: create topic fixed " + specified + " unless it exists\n"},
		{[]string{"--table", "public.outbox", "--kafka-brokers", "127.0.0.1:1", "--create-topics=false", "--topic", "fixed"}, header + pub + slot},
	}
	for _, tt := range tests {
		code, out, errOut := exec(t, append([]string{"setup", "--print"}, tt.args...)...)
		if code != exitOK || out != tt.want || errOut != "" {
			t.Errorf("setup --print %q: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", tt.args, code, errOut, out, tt.want)
		}
	}
}

// TestCommandsWithoutPostgres: setup and status say what to look at when
// Postgres cannot be reached, on one line without the password, and exit
// 1; check lists each item, failing those that need a server.
func TestCommandsWithoutPostgres(t *testing.T) {
	const url = "postgres://u:Secret-Pw-1@127.0.0.1:1/db?sslmode=disable"
	for _, cmd := range [][]string{{"setup"}, {"status"}, {"status", "--json"}} {
		code, out, errOut := exec(t, append(cmd, "--postgres-url", url)...)
		want := "outbox-cdc " + cmd[0] + ": connect to postgres (is it running, and is --postgres-url right?): failed to connect to `user=u database=db`"
		if code != exitFailure || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "Secret-Pw-1") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", cmd, code, out, errOut)
		}
	}

	code, out, _ := exec(t, "check", "--postgres-url", url, "--kafka-brokers", "127.0.0.1:1",
		"--cleanup", "delete-after-publish", "--backfill-where", "true", "--message-prefix", "m")
	var items []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "[") {
			items = append(items, line[:strings.Index(line+":", ":")])
		}
	}
	want := []string{"[FAIL] postgres reachable", "[ok  ] postgres TLS", "[FAIL] cleanup", "[FAIL] backfill of public.outbox", "[ok  ] messages",
		"[ok  ] kafka TLS", "[FAIL] kafka reachable"}
	if code != exitFailure || strings.Join(items, "|") != strings.Join(want, "|") ||
		!strings.HasPrefix(out, "outbox-cdc check: postgres u@127.0.0.1:1/db, kafka 127.0.0.1:1, tables public.outbox\n\n") ||
		!strings.HasSuffix(out, "\n\n4 of 7 checks failed\n") || strings.Contains(out, "Secret-Pw-1") ||
		!strings.Contains(out, `[ok  ] messages: transactional logical decoding messages with prefix "m" are events (outbox.Writer's Emit, sql/outbox_emit.sql), routed by outbox.event.{aggregate_type}`) {
		t.Errorf("check: exit %d, items %q:\n%s", code, items, out)
	}
}

// TestCheckOffline: --offline validates the configuration alone, asking no
// server (none is there), in one line; an invalid one is a usage error.
func TestCheckOffline(t *testing.T) {
	code, out, errOut := exec(t, "check", "--offline", "--postgres-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1")
	if code != exitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, "the configuration is valid") || errOut != "" {
		t.Errorf("check --offline: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = exec(t, "check", "--offline", "--postgres-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1",
		"--topic", "a.{no_such_column")
	if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 {
		t.Errorf("check --offline, a bad topic: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestMaxProcs: --max-procs sets GOMAXPROCS for run unless 0, or a
// GOMAXPROCS variable said otherwise.
func TestMaxProcs(t *testing.T) {
	for _, c := range []struct {
		flag    int
		environ []string
		want    int
	}{
		{1, []string{"PATH=/bin"}, 1},
		{4, nil, 4},
		{0, nil, 0},
		{1, []string{"GOMAXPROCS=2"}, 0},
		{1, []string{"GOMAXPROCS_X=2"}, 1},
		{1, []string{"GOMAXPROCS="}, 1},  // Go ignores it
		{1, []string{"GOMAXPROCS=0"}, 1}, // Go ignores it
	} {
		if got := maxProcs(c.flag, c.environ); got != c.want {
			t.Errorf("maxProcs(%d, %q) = %d, want %d", c.flag, c.environ, got, c.want)
		}
	}
}
