package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withURL replaces the value of --postgres-url in args.
func withURL(args []string, url string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == "--postgres-url" {
			out[i+1] = url
		}
	}
	return out
}

// without drops flag and its value from args.
func without(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// TestLeastPrivilegeRole walks an operator's path: check fails for a role
// without REPLICATION and names each fix; setup (as a superuser) prints and
// then runs the SQL; check then passes for that role, run streams as it, and
// status reports the slot in text and JSON.
func TestLeastPrivilegeRole(t *testing.T) {
	o := newOutbox(t, "lp", defaultColumns)
	ctx := context.Background()
	role, password := o.name+"_relay", "lp-Secret-"+o.name
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, role, password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = o.db.Exec(ctx, fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE %s`, role, role)) })
	roleURL := strings.Replace(pg.URL, "postgres://postgres@", fmt.Sprintf("postgres://%s:%s@", role, password), 1)
	runArgs := withURL(o.args("--heartbeat-interval", "1s"), roleURL)
	checkArgs := without(runArgs, "--status-interval")
	checkArgs = without(without(checkArgs, "--http-addr"), "--heartbeat-interval")

	code, out := runOnce(t, append([]string{"check"}, checkArgs...)...)
	t.Logf("check as %s before setup (exit %d):\n%s", role, code, out)
	for _, want := range []string{
		"[FAIL] role may replicate: " + role + " lacks REPLICATION",
		"fix: as a superuser: ALTER ROLE",
		"may not SELECT it, which streaming does not need",
		"[FAIL] publication: \"" + o.name + "\" does not exist, and " + role + " may not create it",
		"[ok  ] kafka reachable",
		"checks failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q", want)
		}
	}
	if code != 1 {
		t.Errorf("check exit %d, want 1", code)
	}
	if strings.Contains(out, password) {
		t.Errorf("check printed the password")
	}

	setupArgs := []string{"--postgres-url", pg.URL, "--table", "public." + o.name, "--publication", o.name, "--slot", o.name, "--role", role}
	code, printed := runOnce(t, append(append([]string{"setup"}, setupArgs...), "--print")...)
	t.Logf("setup --print (exit %d):\n%s", code, printed)
	for _, want := range []string{
		fmt.Sprintf(`CREATE PUBLICATION "%s" FOR TABLE "public"."%s" WITH (publish = 'insert');`, o.name, o.name),
		fmt.Sprintf(`ALTER ROLE "%s" WITH LOGIN REPLICATION;`, role),
		fmt.Sprintf(`GRANT USAGE ON SCHEMA "public" TO "%s";`, role),
		fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput'`, o.name), // and, on 17+, failover-enabled
	} {
		if code != 0 || !strings.Contains(printed, want) {
			t.Errorf("setup --print lacks %q", want)
		}
	}
	var slots int
	_ = o.db.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&slots)
	if slots != 0 {
		t.Fatalf("setup --print created the slot")
	}
	if code, out := runOnce(t, append([]string{"setup"}, setupArgs...)...); code != 0 {
		t.Fatalf("setup: exit %d\n%s", code, out)
	}
	var canSelect bool
	_ = o.db.QueryRow(ctx, `SELECT has_table_privilege($1, $2, 'SELECT')`, role, "public."+o.name).Scan(&canSelect)
	if canSelect {
		t.Errorf("setup granted SELECT on the outbox table; the relay streams without it")
	}
	if code, out := runOnce(t, append([]string{"setup"}, setupArgs...)...); code != 0 || strings.Contains(out, "CREATE PUBLICATION") || strings.Contains(out, "pg_create_logical_replication_slot") {
		t.Errorf("setup run twice: exit %d, want 0 and only the (idempotent) grants:\n%s", code, out)
	}

	code, out = runOnce(t, append([]string{"check"}, checkArgs...)...)
	t.Logf("check as %s after setup (exit %d):\n%s", role, code, out)
	if code != 0 || !strings.Contains(out, "checks passed") || strings.Contains(out, "[FAIL]") {
		t.Errorf("check after setup: exit %d", code)
	}

	r := startRelay(t, runArgs...)
	w, counters := newWritten(), map[string]int{}
	insertRows(t, o, w, makeRows(200, 10, "order", counters), 20)
	msgs := consume(t, []string{o.name + ".order"}, 200, time.Minute)
	checkDelivered(t, o, w, msgs)
	waitConfirmed(t, o, o.CurrentLSN(t), 30*time.Second)

	statusArgs := []string{"status", "--postgres-url", roleURL, "--table", "public." + o.name, "--publication", o.name, "--slot", o.name}
	code, out = runOnce(t, statusArgs...)
	t.Logf("status while streaming (exit %d):\n%s", code, out)
	if code != 0 || !strings.Contains(out, "consumer:      streaming, pid") || !strings.Contains(out, "wal_status:    reserved") {
		t.Errorf("status: exit %d", code)
	}
	code, out = runOnce(t, append(statusArgs, "--json")...)
	var st struct {
		Slot         string `json:"slot"`
		Active       bool   `json:"active"`
		LagBytes     *int64 `json:"lag_bytes"`
		WALStatus    string `json:"wal_status"`
		ConfirmedLSN string `json:"confirmed_lsn"`
		Publication  bool   `json:"publication_carries_tables"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	if st.Slot != o.name || !st.Active || st.LagBytes == nil || st.WALStatus != "reserved" || st.ConfirmedLSN == "" || !st.Publication {
		t.Errorf("status --json: %+v", st)
	}
	if n := r.countLines("heartbeats off"); n != 0 {
		t.Errorf("heartbeats were turned off for the least-privilege role")
	}
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	if _, out = runOnce(t, statusArgs...); !strings.Contains(out, "consumer:      none") {
		t.Errorf("status after the relay stopped:\n%s", out)
	}
	if strings.Contains(r.LogText(), password) {
		t.Errorf("the relay's log holds the password")
	}
}

// TestCheckFindsBrokerAndTopicProblems: an unreachable broker, and a fixed
// topic that does not exist with auto-creation off.
func TestCheckFindsBrokerAndTopicProblems(t *testing.T) {
	o := newOutbox(t, "checkkafka", defaultColumns)
	base := without(without(o.args(), "--status-interval"), "--http-addr")

	code, out := runOnce(t, append(append([]string{"check"}, without(base, "--kafka-brokers")...), "--kafka-brokers", "127.0.0.1:1")...)
	t.Logf("check with a wrong broker address (exit %d):\n%s", code, out)
	if code != 1 || !strings.Contains(out, "[FAIL] kafka reachable") || !strings.Contains(out, "fix: is it running, and is --kafka-brokers right?") {
		t.Errorf("check with a wrong broker: exit %d", code)
	}

	code, out = runOnce(t, append(append([]string{"check"}, without(base, "--topic")...),
		"--topic", o.name+".fixed", "--create-topics=false", "--kafka-auto-create-topics=false", "--dlq-topic", o.name+".dlq")...)
	t.Logf("check with missing topics and auto-creation off (exit %d):\n%s", code, out)
	for _, want := range []string{
		"[FAIL] event topic: " + o.name + ".fixed does not exist, and will not be created (--create-topics=false)",
		"fix: create it: kafka-topics.sh --bootstrap-server",
		"[FAIL] dead-letter topic: " + o.name + ".dlq does not exist",
		"[warn] max_slot_wal_keep_size: unlimited",
		"[ok  ] publication: \"" + o.name + "\" does not exist yet; run will create it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q", want)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
