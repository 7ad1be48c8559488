package integration

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// A slot that is not where the data now is: a promoted standby that never
// had it, a database restored from a backup without it. Both heal with
// cause missing. make test-faults runs these (each starts clusters of its
// own).

// TestSlotHealAfterFailover runs the relay on a primary with a physical
// standby that has no copy of the slot (--slot-failover false; on 16 and
// older there is no slot sync at all), freezes it (SIGSTOP), commits rows
// it cannot publish, waits until the standby has replayed everything the
// primary committed (so no row is lost by asynchronous replication, which
// no relay could recover), crashes the primary and promotes the standby.
// The relay, woken, reconnects to the new primary through the multi-host
// URL, finds no slot and heals (cause missing); writes go on there. Every
// row committed on the old primary and on the new one arrives; the events
// read more than once are within the heal's rows; the table empties.
func TestSlotHealAfterFailover(t *testing.T) {
	slowFault(t)
	t.Setenv("OUTBOX_TEST_DELIVERY", "at-least-once") // the heal alone, not exactly-once's timeline checks
	ctx := context.Background()
	primary, err := testkit.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	standby, err := testkit.StartStandby(primary, "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	name := fmt.Sprintf("healfailover_%d", time.Now().UnixNano()%1e9)
	execAt(t, primary.URL, fmt.Sprintf("CREATE TABLE %s (%s)", name, defaultColumns))
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.Port, standby.Port)
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	o := &outbox{Outbox: &testkit.Outbox{Name: name, DB: db, URL: url}, name: name, db: db}
	topics := []string{name + ".Order", name + ".order"} // the row writer's, and insertSingles'

	r := startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: o.args(append(healArgs, "--slot-failover", "false")...), NoWait: true})
	waitFor(t, r, 60*time.Second, "the relay streams from the primary", func() bool {
		var active bool
		return db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&active) == nil && active
	})
	prior := len(r.heals(t)) // a first start is not a loss; if it logs a heal, that one is not the failover's
	w := startRowWriter(o, func() string { return name }, 5*time.Millisecond)
	stop := w.stopOnce(t)
	waitFor(t, r, 30*time.Second, "the writer committed 200 rows", func() bool { return w.count() >= 200 })
	consume(t, topics[:1], 100, time.Minute)
	before := stop()

	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Signal(syscall.SIGCONT) })
	frozen := insertSingles(ctx, t, primary.URL, name, 50)
	waitReplayed(t, primary.URL, standby.URL)
	if n := query[int64](ctx, t, standby.URL, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, name); n != 0 {
		t.Fatalf("the standby holds a copy of slot %s: this test needs a standby without one", name)
	}
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	w = startRowWriter(o, func() string { return name }, 5*time.Millisecond)
	stop = w.stopOnce(t)
	hs := waitHeals(t, r, prior+1, 2*time.Minute)[prior:]
	healed := w.count()
	waitFor(t, r, 60*time.Second, "100 rows committed on the new primary after the heal", func() bool { return w.count() >= healed+100 })
	after := stop()

	all := append(append(append([]string(nil), before...), frozen...), after...)
	msgs := consume(t, topics, len(all), 2*time.Minute)
	repeated := countDuplicates(t, all, msgs)
	rows := checkMissingHeals(t, r, name, hs)
	if repeated > rows {
		t.Errorf("%d events read more than once, more than the %d rows the heal says it re-read", repeated, rows)
	}
	o.waitEmpty(t, nil, 30*time.Second)
	t.Logf("failover without the slot: healed %s after the promotion (%d rows re-read); %d rows before the freeze, %d while frozen, %d on the new primary; %d read more than once",
		time.Since(promoted).Round(time.Millisecond), rows, len(before), len(frozen), len(after), repeated)
	stopRelay(t, r)
}

// checkMissingHeals: the relay healed slot once, with cause missing (a
// slot the server never had, by the contract, even when the relay ran
// through the failover: a relay reporting dropped did not tell the new
// server from the old), announced by its WARN line; it returns the rows
// the heals re-read.
func checkMissingHeals(t *testing.T, r *relay, slot string, hs []heal) int {
	t.Helper()
	if len(hs) != 1 {
		t.Errorf("%d `%s` lines, want 1: %+v", len(hs), healEndMsg, hs)
	}
	rows := 0
	for _, h := range hs {
		rows += h.rows
		if h.cause != "missing" || h.slot != slot {
			t.Errorf("a heal of slot %q with cause %q, want slot %s and cause missing", h.slot, h.cause, slot)
		}
	}
	checkHealWarning(t, r, slot, "missing")
	return rows
}

// waitReplayed waits up to 30 s until the standby at standbyURL has
// replayed the WAL the primary at primaryURL has flushed now.
func waitReplayed(t *testing.T, primaryURL, standbyURL string) {
	t.Helper()
	ctx := context.Background()
	target, err := pglogrepl.ParseLSN(query[string](ctx, t, primaryURL, `SELECT pg_current_wal_flush_lsn()::text`))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		replayed, err := pglogrepl.ParseLSN(query[string](ctx, t, standbyURL, `SELECT coalesce(pg_last_wal_replay_lsn(), '0/0')::text`))
		if err != nil {
			t.Fatal(err)
		}
		if replayed >= target {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby replayed up to %s, short of the primary's %s, after 30 s", replayed, target)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSlotHealAfterRestore restores the database from a base backup, which
// carries no slot. The relay publishes A and stops; B is committed; the
// backup is taken (B in the table, unpublished); a relay publishes B and C
// and deletes them. The restore brings back B and no slot; D is committed
// there. The relay heals (cause missing) and re-reads exactly B and D:
// after the restore B's and D's events are published once more each, A's
// and C's not again; the table empties.
func TestSlotHealAfterRestore(t *testing.T) {
	slowFault(t)
	// At-least-once: an exactly-once relay stops on a restored database
	// until its checkpoint is reset (TestExactlyOnceRestoredDatabase).
	t.Setenv("OUTBOX_TEST_DELIVERY", "at-least-once")
	ctx := context.Background()
	server, err := testkit.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop() })
	o := newOutboxOn(t, server.URL, "healrestore")
	args := o.args(healArgs...)
	topics := []string{o.name + ".order"}

	r := startRelayOn(t, server.URL, args...)
	a := insertSingles(ctx, t, server.URL, o.name, 100)
	consume(t, topics, len(a), time.Minute)
	o.waitEmpty(t, nil, 30*time.Second)
	stopRelay(t, r)
	b := insertSingles(ctx, t, server.URL, o.name, 50)
	if err := server.BaseBackup(); err != nil {
		t.Fatal(err)
	}
	o.db.Reset() // its connections went with the server's restart

	r = startRelayOn(t, server.URL, args...)
	c := insertSingles(ctx, t, server.URL, o.name, 30)
	consume(t, topics, len(a)+len(b)+len(c), time.Minute)
	o.waitEmpty(t, nil, 30*time.Second)
	stopRelay(t, r)
	// What Kafka holds before the restore: at least once, a restart may
	// already have published some rows twice (before PostgreSQL 17 a fast
	// shutdown need not save a slot's last confirmed position), so the
	// heal's copies are counted from here.
	before := copiesOf(consume(t, topics, len(a)+len(b)+len(c), time.Minute))

	if err := server.RestoreSnapshot(); err != nil {
		t.Fatal(err)
	}
	o.db.Reset()
	if n := query[int64](ctx, t, server.URL, `SELECT count(*) FROM pg_replication_slots`); n != 0 {
		t.Fatalf("the restored database has %d slot(s): the backup should carry none", n)
	}
	if left := o.tableIDs(t); len(left) != len(b) || countOf(left, b) != len(b) {
		t.Fatalf("the restored table holds %d rows, %d of B's %d: the backup should hold B alone", len(left), countOf(left, b), len(b))
	}
	d := insertSingles(ctx, t, server.URL, o.name, 20)
	restarted := time.Now()
	r = startRelayOn(t, server.URL, args...)
	hs := waitHeals(t, r, 1, time.Minute)
	all := append(append(append(append([]string(nil), a...), b...), c...), d...)
	msgs := consume(t, topics, len(all), time.Minute)

	rows := checkMissingHeals(t, r, o.name, hs)
	if rows != len(b)+len(d) {
		t.Errorf("the heal re-read %d rows, want the restored table's %d (B's %d and D's %d)", rows, len(b)+len(d), len(b), len(d))
	}
	countDuplicates(t, all, msgs) // every row, the restored outbox's included, arrived
	copies := copiesOf(msgs)
	for _, set := range []struct {
		name string
		ids  []string
		want int
	}{{"A", a, 0}, {"B", b, 1}, {"C", c, 0}, {"D", d, 1}} {
		for _, id := range set.ids {
			if got := copies[id] - before[id]; got != set.want {
				t.Errorf("%s's event %s published %d more times after the restore (%d before), want %d", set.name, id, got, before[id], set.want)
				break
			}
		}
	}
	o.waitEmpty(t, nil, 30*time.Second)
	if len(hs) == 1 {
		checkHealMetrics(t, r, hs[0], restarted)
	}
	stopRelay(t, r)
}

// countOf counts the ids in set.
func countOf(set map[string]bool, ids []string) int {
	n := 0
	for _, id := range ids {
		if set[id] {
			n++
		}
	}
	return n
}

// copiesOf counts each event id's copies in msgs.
func copiesOf(msgs []kafka.Message) map[string]int {
	copies := map[string]int{}
	for _, m := range msgs {
		id, _ := testkit.Header(m, "id")
		copies[id]++
	}
	return copies
}
