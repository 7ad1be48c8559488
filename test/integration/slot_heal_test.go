package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// A lost slot heals from the outbox (issue 39): with --on-slot-lost heal
// and a cleanup mode, the rows still in the table are the events not yet
// known to be published; a relay whose slot is gone recreates it and
// publishes them from its snapshot. The log lines, the metrics and the
// flag these tests assert on are fixed by the contract.

const (
	healStartMsg = "replication slot lost: healing from the outbox" // WARN, when a heal starts
	healEndMsg   = "slot healed"                                    // INFO, when it ends
	healRefusal  = "--on-slot-lost heal needs --cleanup"
)

// healArgs are the flags every healing relay of these tests runs with.
var healArgs = []string{"--cleanup", "delete-after-publish", "--on-slot-lost", "heal"}

// TestSlotHealRefusedWithoutCleanup: without a cleanup mode nothing in the
// table says what was published, so --on-slot-lost heal (the flag or its
// variable) is refused at start with the reason, and no slot is created;
// --on-slot-lost fail, the default, needs no cleanup and streams.
func TestSlotHealRefusedWithoutCleanup(t *testing.T) {
	o := newOutbox(t, "healrefused", defaultColumns)
	code, out := runOnce(t, o.args("--on-slot-lost", "heal", "--http-addr", "")...)
	if code == 0 || !strings.Contains(out, healRefusal) {
		t.Errorf("--on-slot-lost heal without --cleanup: exit %d, want non-zero and %q:\n%s", code, healRefusal, testkit.Tail(out, 10))
	}
	code, out = runOnceEnv(t, []string{"OUTBOX_CDC_ON_SLOT_LOST=heal"}, o.args("--http-addr", "")...)
	if code == 0 || !strings.Contains(out, healRefusal) {
		t.Errorf("OUTBOX_CDC_ON_SLOT_LOST=heal without --cleanup: exit %d, want non-zero and %q:\n%s", code, healRefusal, testkit.Tail(out, 10))
	}
	var slots int
	if err := o.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 0 {
		t.Errorf("the refused relay left its slot %s behind, pinning WAL", o.name)
	}
	r := startRelay(t, o.args("--on-slot-lost", "fail")...)
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("--on-slot-lost fail without --cleanup: exit %d on SIGTERM\n%s", code, testkit.Tail(r.LogText(), 20))
	}
}

// runOnceEnv is runOnce with extra environment variables.
func runOnceEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("run outbox-cdc: %v", err)
	}
	return 0, string(out)
}

// TestSlotHealAfterWALRemoved stops the relay, goes on writing and lets
// max_slot_wal_keep_size invalidate its slot (a cluster of the test's own).
// --on-slot-lost fail, explicit or by default, stops as today; heal
// restarts with every committed row delivered. With exactly-once, a
// read_committed consumer reads none twice; two instances racing to heal
// heal once (make test-faults runs these two).
func TestSlotHealAfterWALRemoved(t *testing.T) {
	server := startLossyPostgres(t)
	t.Run("at-least-once", func(t *testing.T) {
		t.Setenv("OUTBOX_TEST_DELIVERY", "at-least-once") // its counts are at-least-once's
		healAfterWALRemoved(t, server, false)
	})
	t.Run("mark", func(t *testing.T) {
		t.Setenv("OUTBOX_TEST_DELIVERY", "at-least-once")
		healMarked(t, server)
	})
	t.Run("exactly-once", func(t *testing.T) {
		slowFault(t)
		t.Setenv("OUTBOX_TEST_DELIVERY", "exactly-once") // what it reads, it reads at read_committed
		healAfterWALRemoved(t, server, true)
	})
	t.Run("two_instances", func(t *testing.T) {
		slowFault(t)
		healRace(t, server)
	})
}

// healAfterWALRemoved: the relay publishes, stops with SIGTERM; rows are
// committed while WAL churns until the slot is lost. The restart heals:
// one WARN line naming wal_removed, one `slot healed` line whose rows are
// the rows the table held at the restart (a graceful stop deleted what it
// had published, or they are counted among them); every committed row
// arrives, in order per aggregate; the consumer's duplicates are exactly
// the rows of the table Kafka already held (at-least-once) or none
// (exactly-once); the stream goes on; the metrics and status say so.
func healAfterWALRemoved(t *testing.T, server *testkit.Postgres, exactly bool) {
	o := newOutboxOn(t, server.URL, "healwal")
	args := o.args(healArgs...)
	if exactly {
		args = exactlyArgs(o, healArgs...)
	}
	topics := []string{o.name + ".order"}
	w, counters := newWritten(), map[string]int{}
	r := startRelayOn(t, server.URL, args...)
	insertRows(t, o, w, makeRows(300, 20, "order", counters), 10)
	consume(t, topics, len(w.committed), time.Minute)
	stopRelay(t, r)

	loseSlot(t, o, func() { insertRows(t, o, w, makeRows(20, 20, "order", counters), 5) })
	insertRows(t, o, w, makeRows(40, 20, "order", counters), 10)
	if !exactly {
		checkFailStops(t, o, args)
	}

	left := o.tableIDs(t)
	already := countPublished(t, topics[0], keys(left))
	t.Logf("at the restart: %d rows committed, %d in the table, %d of them already in Kafka", len(w.committed), len(left), already)
	if exactly && already > 0 {
		t.Errorf("exactly-once: a graceful stop left %d published rows in the table (it deletes what it committed before it exits)", already)
	}
	restarted := time.Now()
	r = startRelayOn(t, server.URL, args...)
	hs := waitHeals(t, r, 1, time.Minute)
	insertRows(t, o, w, makeRows(60, 20, "order", counters), 10) // the stream after the heal
	msgs := consume(t, topics, len(w.committed), 2*time.Minute)

	h := hs[0]
	checkWALRemovedCause(t, serverVersion(t, o), h.cause)
	checkHealWarning(t, r, o.name, h.cause)
	if len(hs) != 1 {
		t.Errorf("%d `%s` lines, want 1: %+v", len(hs), healEndMsg, hs)
	}
	if !exactly && h.rows != len(left) {
		t.Errorf("the heal re-read %d rows, but the table held %d at the restart", h.rows, len(left))
	}
	if exactly && h.rows > len(left) {
		t.Errorf("the heal re-read %d rows, but the table held %d at the restart", h.rows, len(left))
	}
	repeated := countDuplicates(t, keys(w.ids()), msgs)
	_, copies := byID(t, msgs)
	switch {
	case repeated > h.rows:
		t.Errorf("%d events read more than once, more than the %d rows the heal says it re-read", repeated, h.rows)
	case exactly && copies != 0:
		t.Errorf("exactly-once: %d events read twice at read_committed after the heal, want none", copies)
	case !exactly && copies != already:
		t.Errorf("%d extra copies read, want %d: each row the table held that Kafka already had, published once more", copies, already)
	}
	checkIncreasing(t, msgs, w.ids())
	o.waitEmpty(t, nil, 30*time.Second)
	checkHealMetrics(t, r, h, restarted)
	checkStatusShowsHeal(t, o, h)
	t.Logf("exactly-once=%v: %d rows committed, all delivered; the heal (cause %s) re-read %d, %d extra copies read",
		exactly, len(w.committed), h.cause, h.rows, copies)
	stopRelay(t, r)
}

// checkFailStops runs the relay on o's lost slot with --on-slot-lost fail,
// then with no --on-slot-lost (fail is the default): each exits 1 with
// today's message, and the slot is left as it was (lost, not healed).
func checkFailStops(t *testing.T, o *outbox, args []string) {
	t.Helper()
	base := append(without(without(args, "--on-slot-lost"), "--http-addr"), "--http-addr", "")
	for name, run := range map[string][]string{
		"--on-slot-lost fail": append(append([]string(nil), base...), "--on-slot-lost", "fail"),
		"no --on-slot-lost":   base,
	} {
		code, out := runOnce(t, run...)
		if code != 1 || !strings.Contains(out, "was invalidated") || strings.Contains(out, healStartMsg) {
			t.Errorf("%s on a lost slot: exit %d, want 1 and %q, no heal:\n%s", name, code, "was invalidated", testkit.Tail(out, 10))
		}
	}
	if s := slotWALStatus(t, o); s != "lost" {
		t.Errorf("after --on-slot-lost fail, wal_status %q, want lost: the slot was touched", s)
	}
}

// checkWALRemovedCause: PostgreSQL 17 and newer say why a slot was
// invalidated (invalidation_reason wal_removed); before, wal_status lost
// with max_slot_wal_keep_size set says it, and a relay may report it as
// wal_removed or, the contract allows, invalidated.
func checkWALRemovedCause(t *testing.T, version int, cause string) {
	t.Helper()
	if cause == "wal_removed" || version < 170000 && cause == "invalidated" {
		return
	}
	t.Errorf("the heal's cause %q on PostgreSQL %d, want wal_removed", cause, version)
}

// healRace: two instances start at once on a lost slot, both with heal.
// One heals, one streams, the other stands by: one `slot healed` line in
// both logs together, every committed row arrives, and the repeats are
// within the one heal's rows.
func healRace(t *testing.T, server *testkit.Postgres) {
	o := newOutboxOn(t, server.URL, "healrace")
	args := o.args(healArgs...)
	topics := []string{o.name + ".order"}
	w, counters := newWritten(), map[string]int{}
	r := startRelayOn(t, server.URL, args...)
	insertRows(t, o, w, makeRows(200, 20, "order", counters), 10)
	consume(t, topics, len(w.committed), time.Minute)
	stopRelay(t, r)
	loseSlot(t, o, func() { insertRows(t, o, w, makeRows(20, 20, "order", counters), 5) })
	left := len(o.tableIDs(t))

	a := startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, NoWait: true})
	b := startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, NoWait: true})
	deadline := time.Now().Add(time.Minute)
	for len(a.heals(t))+len(b.heals(t)) == 0 {
		if time.Now().After(deadline) || !a.running() && !b.running() {
			t.Fatalf("neither instance healed within a minute\nfirst:\n%s\nsecond:\n%s", testkit.Tail(a.LogText(), 15), testkit.Tail(b.LogText(), 15))
		}
		time.Sleep(100 * time.Millisecond)
	}
	insertRows(t, o, w, makeRows(40, 20, "order", counters), 10)
	msgs := consume(t, topics, len(w.committed), 2*time.Minute)
	// One streams, the other stands by: not necessarily the healer that
	// streams, since the other takes the slot the moment the heal's lock
	// is released, and the healer then finds it held.
	waitFor(t, a, 30*time.Second, "one instance stands by", func() bool {
		return a.countLines("standing by")+b.countLines("standing by") > 0
	})
	hs := append(a.heals(t), b.heals(t)...)
	if len(hs) != 1 {
		t.Fatalf("%d `%s` lines in the two logs, want 1: %+v", len(hs), healEndMsg, hs)
	}
	repeated := countDuplicates(t, keys(w.ids()), msgs)
	if repeated > hs[0].rows {
		t.Errorf("%d events read more than once, more than the one heal's %d rows", repeated, hs[0].rows)
	}
	if !a.running() || !b.running() {
		t.Errorf("an instance exited: first running %v, second running %v", a.running(), b.running())
	}
	t.Logf("two instances on a lost slot: one healed (%d rows, the table held %d), %d events read more than once", hs[0].rows, left, repeated)
}

// heal is one `slot healed` line of a relay's log.
type heal struct {
	slot, cause string
	rows        int
}

// heals returns the relay's `slot healed` lines, in order; one whose rows
// is not an integer fails the test.
func (r *relay) heals(t *testing.T) []heal {
	t.Helper()
	var out []heal
	for _, rec := range testkit.LogRecords(r.LogText(), healEndMsg) {
		n, err := strconv.Atoi(rec["rows"])
		if err != nil {
			t.Fatalf("a `%s` line whose rows is %q, not an integer: %v", healEndMsg, rec["rows"], rec)
		}
		out = append(out, heal{slot: rec["slot"], cause: rec["cause"], rows: n})
	}
	return out
}

// waitHeals waits until the relay has logged at least n heals, failing
// after timeout or when it exits, and returns them.
func waitHeals(t *testing.T, r *relay, n int, timeout time.Duration) []heal {
	t.Helper()
	waitFor(t, r, timeout, fmt.Sprintf("the relay logged %d `%s` line(s)", n, healEndMsg), func() bool { return len(r.heals(t)) >= n })
	return r.heals(t)
}

// checkHealWarning: a WARN line announced the heal of slot, with cause.
func checkHealWarning(t *testing.T, r *relay, slot, cause string) {
	t.Helper()
	for _, rec := range testkit.LogRecords(r.LogText(), healStartMsg) {
		if rec["level"] == "WARN" && rec["slot"] == slot && rec["cause"] == cause && rec["tables"] != "" {
			return
		}
	}
	t.Errorf("no WARN %q line with slot=%s cause=%s and the tables:\n%s", healStartMsg, slot, cause, testkit.Tail(r.LogText(), 20))
}

// checkHealMetrics: after the one heal h, the relay's counters count it
// and its rows, and the last heal's time is after since.
func checkHealMetrics(t *testing.T, r *relay, h heal, since time.Time) {
	t.Helper()
	m, _ := testkit.Scrape(t, r.HTTPAddr(t))
	if got := m[fmt.Sprintf(`outbox_cdc_slot_heals_total{cause=%q}`, h.cause)]; got != 1 {
		t.Errorf("outbox_cdc_slot_heals_total{cause=%q} %v, want 1", h.cause, got)
	}
	if got := m["outbox_cdc_slot_heal_rows_total"]; got != float64(h.rows) {
		t.Errorf("outbox_cdc_slot_heal_rows_total %v, want the log's %d", got, h.rows)
	}
	at := time.Unix(int64(m["outbox_cdc_slot_last_heal_timestamp_seconds"]), 0)
	if at.Before(since.Truncate(time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("outbox_cdc_slot_last_heal_timestamp_seconds %v, want between %s and now", at, since)
	}
}

// checkStatusShowsHeal: status reports the last heal, its cause and rows
// (recorded in Postgres: any process reads it).
func checkStatusShowsHeal(t *testing.T, o *outbox, h heal) {
	t.Helper()
	_, out := runOnce(t, "status", "--postgres-url", o.URL, "--table", "public."+o.name, "--slot", o.name, "--publication", o.name)
	if !strings.Contains(strings.ToLower(out), "heal") || !strings.Contains(out, h.cause) || !strings.Contains(out, strconv.Itoa(h.rows)) {
		t.Errorf("status does not show the last heal (cause %s, %d rows):\n%s", h.cause, h.rows, out)
	}
}

// keys returns a set's members.
func keys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

// ids is the set of the committed rows' ids.
func (w *written) ids() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.committed))
	for id := range w.committed {
		out[id] = true
	}
	return out
}

// healMarked is the heal with --cleanup mark: the rows a heal publishes
// are the unmarked ones (published_at IS NULL), and rows marked before
// the slot was lost are not read again; after the heal every row is
// marked and every committed row was delivered.
func healMarked(t *testing.T, server *testkit.Postgres) {
	o := newOutboxOn(t, server.URL, "healmark")
	execAt(t, server.URL, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN published_at timestamptz`, pgx.Identifier{o.name}.Sanitize()))
	args := o.args("--cleanup", "mark", "--mark", "published_at=now()", "--on-slot-lost", "heal")
	topics := []string{o.name + ".order"}
	w, counters := newWritten(), map[string]int{}
	r := startRelayOn(t, server.URL, args...)
	insertRows(t, o, w, makeRows(100, 20, "order", counters), 10)
	consume(t, topics, len(w.committed), time.Minute)
	unmarked := func() int64 {
		return query[int64](context.Background(), t, server.URL,
			fmt.Sprintf(`SELECT count(*) FROM %s WHERE published_at IS NULL`, pgx.Identifier{o.name}.Sanitize()))
	}
	waitFor(t, r, 30*time.Second, "every published row marked", func() bool { return unmarked() == 0 })
	stopRelay(t, r)

	loseSlot(t, o, func() { insertRows(t, o, w, makeRows(20, 20, "order", counters), 5) })
	left := unmarked()
	r = startRelayOn(t, server.URL, args...)
	hs := waitHeals(t, r, 1, time.Minute)
	msgs := consume(t, topics, len(w.committed), time.Minute)
	if hs[0].rows != int(left) {
		t.Errorf("the heal re-read %d rows, want the %d unmarked ones (the %d marked rows are published)", hs[0].rows, left, len(w.committed)-int(left))
	}
	if repeated := countDuplicates(t, keys(w.ids()), msgs); repeated != 0 {
		t.Errorf("%d events read more than once: the heal re-read marked rows", repeated)
	}
	waitFor(t, r, 30*time.Second, "every row marked after the heal", func() bool { return unmarked() == 0 })
	t.Logf("--cleanup mark: %d rows committed, the heal re-read the %d unmarked", len(w.committed), hs[0].rows)
	stopRelay(t, r)
}
