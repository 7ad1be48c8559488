package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// serverVersion is server_version_num of the suite's Postgres.
func serverVersion(t *testing.T, o *outbox) int {
	t.Helper()
	var v int
	if err := o.db.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSlotFailoverByVersion: the slot run creates is failover-enabled on
// PostgreSQL 17 and newer (--slot-failover=auto), and not before; asked for
// on an older server, it is refused with one line; status and check say
// where the slot stands.
func TestSlotFailoverByVersion(t *testing.T) {
	o := newOutbox(t, "failover", defaultColumns)
	version := serverVersion(t, o)
	if version < 170000 {
		code, out := runOnce(t, o.args("--slot-failover", "true", "--http-addr", "")...)
		if code != 1 || !strings.Contains(lastLine(out), "--slot-failover=true needs PostgreSQL 17 or newer") {
			t.Errorf("--slot-failover=true on %d: exit %d, %q", version, code, lastLine(out))
		}
	}
	startRelay(t, o.args()...)
	var failover bool
	if err := o.db.QueryRow(context.Background(), `SELECT coalesce((to_jsonb(s) ->> 'failover')::bool, false) FROM pg_replication_slots s WHERE slot_name = $1`, o.name).Scan(&failover); err != nil {
		t.Fatal(err)
	}
	if want := version >= 170000; failover != want {
		t.Errorf("server %d: slot failover = %v, want %v", version, failover, want)
	}
	_, out := runOnce(t, "status", "--postgres-url", pg.URL, "--table", "public."+o.name, "--slot", o.name, "--publication", o.name)
	want := "failover:      no: logical slots do not survive a failover before PostgreSQL 17"
	if version >= 170000 {
		want = "failover:      yes: failover-enabled, 0 physical standby(s) streaming"
	}
	if !strings.Contains(out, want) {
		t.Errorf("status lacks %q:\n%s", want, out)
	}
	_, out = runOnce(t, append([]string{"check"}, without(without(o.args(), "--status-interval"), "--http-addr")...)...)
	if !strings.Contains(out, "slot failover: ") {
		t.Errorf("check has no slot failover item:\n%s", out)
	}
	t.Logf("PostgreSQL %d: slot failover %v", version, failover)
}

// TestSlotInvalidated: with a small max_slot_wal_keep_size, a relay that
// cannot confirm (its broker frozen) sees its slot's WAL become unreserved,
// and its metric says so; the relay gone, a checkpoint loses the WAL, and
// run then exits 1 with one line saying what was lost and how to recover,
// and check and status report it.
func TestSlotInvalidated(t *testing.T) {
	o := newOutbox(t, "lostslot", defaultColumns)
	ctx := context.Background()
	for _, s := range []string{`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`, `SELECT pg_reload_conf()`} {
		if _, err := o.db.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = o.db.Exec(context.Background(), `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		_, _ = o.db.Exec(context.Background(), `SELECT pg_reload_conf()`)
	})
	status := func() string {
		var s string
		_ = o.db.QueryRow(ctx, `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&s)
		return s
	}
	write := func() {
		t.Helper()
		if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload)
			SELECT gen_random_uuid(), 'order', 'k', 'e', jsonb_build_object('pad', repeat('x', 2000)) FROM generate_series(1, 2000)`, o.name)); err != nil {
			t.Fatal(err)
		}
		if _, err := o.db.Exec(ctx, `SELECT pg_switch_wal()`); err != nil {
			t.Fatal(err)
		}
	}

	// The warning first: a relay whose broker does not answer cannot move
	// its slot, and past max_slot_wal_keep_size (before a checkpoint removes
	// the WAL) the metric says unreserved.
	r := startRelay(t, o.args("--heartbeat-interval", "500ms")...)
	// Ready first: exactly-once opens its Kafka transaction after the
	// stream starts, and watches the slot only once it has; a broker
	// paused before that holds the session (and the metric) back.
	waitReady(t, r.HTTPAddr(t), 200, time.Minute)
	if err := broker.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := true
	resume := func() {
		if paused {
			paused = false
			if err := broker.Resume(); err != nil {
				t.Errorf("resume the broker: %v", err)
			}
		}
	}
	defer resume()
	for i := 0; i < 10 && status() != "unreserved"; i++ {
		write()
	}
	if s := status(); s != "unreserved" {
		t.Fatalf("wal_status %q after writing past max_slot_wal_keep_size without a checkpoint, want unreserved", s)
	}
	addr := r.HTTPAddr(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		m, _ := testkit.Scrape(t, addr)
		if m[`outbox_cdc_slot_wal_status{status="unreserved"}`] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox_cdc_slot_wal_status: unreserved not 1 within 15s: %v", m)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = r.cmd.Process.Kill() // the outage outlasts the relay
	<-r.done
	resume()

	// Then the loss: a checkpoint removes the WAL the slot still needs.
	for i := 0; i < 40 && status() != "lost"; i++ {
		write()
		if _, err := o.db.Exec(ctx, `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
	}
	if status() != "lost" {
		t.Fatalf("wal_status %q after writing far past max_slot_wal_keep_size, want lost", status())
	}
	code, out := runOnce(t, o.args("--http-addr", "")...)
	line := lastLine(out)
	for _, want := range []string{"was invalidated", "was removed before it was read", "pg_drop_replication_slot('" + o.name + "')", "--backfill-where"} {
		if !strings.Contains(line, want) {
			t.Errorf("run's last line lacks %q: %s", want, line)
		}
	}
	if code != 1 {
		t.Errorf("run exit %d, want 1", code)
	}
	_, out = runOnce(t, "status", "--postgres-url", pg.URL, "--table", "public."+o.name, "--slot", o.name, "--publication", o.name)
	if !strings.Contains(out, "wal_status:    lost: the slot was invalidated") {
		t.Errorf("status does not show wal_status lost:\n%s", out)
	}
	_, out = runOnce(t, append([]string{"check"}, without(without(o.args(), "--status-interval"), "--http-addr")...)...)
	// PostgreSQL 17 and newer say why (invalidation_reason); older ones
	// only that the WAL is lost.
	if !strings.Contains(out, "[FAIL] replication slot: \""+o.name+"\" lost the WAL it needs") &&
		!strings.Contains(out, "[FAIL] replication slot: \""+o.name+"\" was invalidated (wal_removed)") {
		t.Errorf("check does not report the lost slot:\n%s", out)
	}
	t.Logf("the metric said unreserved before the slot was lost; run said: %s", line)
}

// TestUnsupportedServer: PostgreSQL 13 lacks pgoutput's messages option,
// which the relay always asks for (its heartbeats are messages). run exits 1
// at start with one line naming the version it needs, leaving no slot behind
// to pin WAL (it used to create the slot and retry START_REPLICATION for
// ever), and check fails on the same item.
func TestUnsupportedServer(t *testing.T) {
	old, err := testkit.StartPostgresVersion("13")
	if err != nil {
		t.Fatalf("start PostgreSQL 13: %v", err)
	}
	t.Cleanup(func() { _ = old.Stop() })
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, old.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE outbox ("+defaultColumns+")"); err != nil {
		t.Fatal(err)
	}
	args := []string{"--postgres-url", old.URL, "--kafka-brokers", broker.Brokers,
		"--table", "public.outbox", "--publication", "outbox13", "--slot", "outbox13", "--topic", "outbox13.{aggregate_type}"}
	want := "PostgreSQL 13 is not supported: outbox-cdc needs PostgreSQL 14 or newer"

	code, out := runWithin(t, 30*time.Second, append(args, "--http-addr", "")...)
	if code != 1 || !strings.Contains(lastLine(out), want) {
		t.Errorf("run on PostgreSQL 13: exit %d, last line %q; want exit 1 and %q; its output:\n%s", code, lastLine(out), want, testkit.Tail(out, 10))
	}
	t.Logf("run, exit %d:\n%s", code, out)
	var slots int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots`).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 0 {
		t.Errorf("run left %d replication slot(s) on PostgreSQL 13, pinning its WAL", slots)
	}

	code, out = runWithin(t, 30*time.Second, append([]string{"check"}, args...)...)
	if code != 1 || !strings.Contains(out, "[FAIL] postgres version: "+want) {
		t.Errorf("check on PostgreSQL 13: exit %d, want 1 and an item \"[FAIL] postgres version: %s\"; its output:\n%s", code, want, out)
	}
}

// runWithin runs outbox-cdc to completion and returns its exit code (-1 if
// it had to be killed after d) and its output.
func runWithin(t *testing.T, d time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ctx.Err() != nil {
			t.Errorf("outbox-cdc %s still running after %s: killed", args[0], d)
		}
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("run outbox-cdc: %v", err)
	}
	return 0, string(out)
}
