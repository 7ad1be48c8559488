package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestExactlyOnceBackfillCrashes: a backfill in exactly-once, killed with
// SIGKILL three times while writers keep committing, resumes past exactly
// the rows its Kafka commits hold: a read_committed consumer reads every
// row once, backfilled or streamed, in order per aggregate. (In
// at-least-once the rows acknowledged since the last recorded progress
// come again.)
func TestExactlyOnceBackfillCrashes(t *testing.T) {
	slowFault(t)
	o := newOutbox(t, "eosbf", defaultColumns)
	ids := writePending(t, o.db, o.name, 5000, 50, 0) // writeMore continues from 5,000
	topic := o.name + ".Order"
	// At most 10 rows per 20 ms: 500 rows/s at most, 10 s or more for the
	// backfill, which each kill below cuts short.
	args := exactlyArgs(o, "--backfill-where", "true", "--max-in-flight", "10", "--batch-timeout", "20ms")
	r := startRelayNoWait(t, args...)
	waitSlot(t, o)
	more := map[int]int{}
	ids = append(ids, writeMore(t, o, 300, more)...) // during the backfill: streamed
	killAfter(t, o, r, topic, 800, 0)
	killAfter(t, o, startRelayNoWait(t, args...), topic, 2000, 0)
	ids = append(ids, writeMore(t, o, 300, more)...) // while it is down
	killAfter(t, o, startRelayNoWait(t, args...), topic, 3500, 0)
	r = startRelayNoWait(t, args...)
	msgs := consumeCommitted(t, []string{topic}, len(ids), 3*time.Minute)
	if dups := countDuplicates(t, ids, msgs); dups != 0 {
		t.Errorf("%d rows read twice at read_committed after three kill -9 during an exactly-once backfill", dups)
	}
	checkKeyOrder(t, msgs)
	if code := r.Stop(t, syscall.SIGTERM, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM\n%s", code, testkit.Tail(r.LogText(), 20))
	}
	t.Logf("three kill -9 during an exactly-once backfill under writes: %d rows, each read once", len(ids))
}

// TestExactlyOnceBackfillCommitAhead: a backfill's Kafka commit lands and
// its recording in the progress table does not (a crash between the two,
// made here by a trigger that refuses the record, then a delete that
// fails): the restart resumes from the commit. Nothing is read twice, and
// with --cleanup the rows the commit holds are cleaned on the way.
func TestExactlyOnceBackfillCommitAhead(t *testing.T) {
	slowFault(t)
	for _, tt := range []struct {
		name  string
		block func(t *testing.T, o *outbox, on bool)
		extra []string
	}{
		{"progress not recorded", blockProgress, nil},
		{"rows not cleaned", func(t *testing.T, o *outbox, on bool) { o.blockDeletes(t, on) },
			[]string{"--cleanup", "delete-after-publish"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := newOutbox(t, "eosbfahead", defaultColumns)
			ids := writePending(t, o.db, o.name, 2000, 20, 0)
			topic := o.name + ".Order"
			args := exactlyArgs(o, append([]string{"--backfill-where", "true", "--max-in-flight", "100"}, tt.extra...)...)
			if _, err := o.db.Exec(context.Background(), backfill.ProgressTableSQL("public")); err != nil {
				t.Fatal(err) // for blockProgress's trigger
			}
			tt.block(t, o, true)
			r := startRelayNoWait(t, args...)
			select {
			case <-r.done:
			case <-time.After(time.Minute):
				t.Fatalf("the relay did not stop when its backfill failed:\n%s", testkit.Tail(r.LogText(), 20))
			}
			committed := len(consumeCommitted(t, []string{topic}, 1, time.Minute))
			tt.block(t, o, false)
			r = startRelayNoWait(t, args...)
			msgs := consumeCommitted(t, []string{topic}, len(ids), 2*time.Minute)
			if dups := countDuplicates(t, ids, msgs); dups != 0 {
				t.Errorf("%d rows read twice at read_committed; the first run committed at least %d before it failed", dups, committed)
			}
			checkKeyOrder(t, msgs)
			if !strings.Contains(r.LogText(), "resuming from the commit") {
				t.Errorf("the restart did not resume from the kafka commit:\n%s", testkit.Tail(r.LogText(), 20))
			}
			if tt.extra != nil {
				waitRows(t, o, "SELECT count(*) FROM "+pgx.Identifier{o.name}.Sanitize(), 0, "rows left uncleaned")
			}
			if code := r.Stop(t, syscall.SIGTERM, 40*time.Second); code != 0 {
				t.Errorf("exit %d on SIGTERM", code)
			}
			t.Logf("%d rows, at least %d committed before the failure: each read once", len(ids), committed)
		})
	}
}

// blockProgress makes recording a backfill's progress (a row of the
// progress table with rows done) fail, or lets it pass again.
func blockProgress(t *testing.T, o *outbox, on bool) {
	t.Helper()
	table, fn := pgx.Identifier{"outbox_cdc_backfill"}.Sanitize(), pgx.Identifier{o.name + "_noprogress"}.Sanitize()
	stmts := []string{"DROP TRIGGER " + fn + " ON " + table, "DROP FUNCTION " + fn}
	if on {
		stmts = []string{
			"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN IF NEW.done > 0 AND NEW.slot = " +
				quoteLiteral(o.name) + " THEN RAISE EXCEPTION 'progress blocked by the test'; END IF; RETURN NEW; END$$",
			"CREATE TRIGGER " + fn + " BEFORE INSERT OR UPDATE ON " + table + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
		}
	}
	for _, q := range stmts {
		if _, err := o.db.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// quoteLiteral quotes s as an SQL string literal (a test's own names).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestExactlyOnceBackfillWithoutPoint: a relay killed after it created the
// slot and before it recorded the slot's consistent point (the progress
// table says pending) resumes its backfill in exactly-once: its commits
// need a point to name the backfill by, taken from the slot. Every row is
// read once.
func TestExactlyOnceBackfillWithoutPoint(t *testing.T) {
	slowFault(t)
	o := newOutbox(t, "eosbfnopoint", defaultColumns)
	ids := writePending(t, o.db, o.name, 300, 10, 0)
	ctx := context.Background()
	if _, err := o.db.Exec(ctx, backfill.ProgressTableSQL("public")); err != nil {
		t.Fatal(err)
	}
	// What the killed relay left: a pending record, then the slot.
	if _, err := o.db.Exec(ctx, `INSERT INTO outbox_cdc_backfill (slot, outbox_table, phase) VALUES ($1, $2, 'pending')`,
		o.name, "public."+o.name); err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, o.name); err != nil {
		t.Fatal(err)
	}
	r := startRelayNoWait(t, exactlyArgs(o, "--backfill-where", "true")...)
	msgs := consumeCommitted(t, []string{o.name + ".Order"}, len(ids), time.Minute)
	if dups := countDuplicates(t, ids, msgs); dups != 0 {
		t.Errorf("%d rows read twice at read_committed", dups)
	}
	if code := r.Stop(t, syscall.SIGTERM, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM\n%s", code, testkit.Tail(r.LogText(), 20))
	}
}

// TestExactlyOnceBackfillTwoTables: a backfill of two tables killed during
// the first resumes the second up to the last row the slot's snapshot saw
// (rows committed since are the slot's: read once); a third, empty in
// that snapshot, is not read at all (its rows are all the slot's). Then a forced
// backfill of both, killed during the first and restarted without
// --backfill-force, still backfills the second.
func TestExactlyOnceBackfillTwoTables(t *testing.T) {
	slowFault(t)
	a := newOutbox(t, "eosbftwo_a", defaultColumns)
	b := newOutbox(t, "eosbftwo_b", defaultColumns)
	c := newOutbox(t, "eosbftwo_c", defaultColumns)
	ids := append(writePending(t, a.db, a.name, 3000, 50, 0), writePending(t, b.db, b.name, 300, 50, 0)...)
	topic := a.name + ".Order"
	args := replaceFlag(exactlyArgs(a, "--backfill-where", "true", "--max-in-flight", "10", "--batch-timeout", "20ms"),
		"--table", "public."+a.name+",public."+b.name+",public."+c.name)
	r := startRelayNoWait(t, args...)
	waitSlot(t, a)
	consume(t, []string{topic}, 1, time.Minute)                     // the slot's snapshot is taken
	ids = append(ids, writePending(t, b.db, b.name, 200, 50, 0)...) // after the slot: streamed
	ids = append(ids, writePending(t, c.db, c.name, 100, 50, 0)...)
	killAfter(t, a, r, topic, 500, 0)
	r = startRelayNoWait(t, args...)
	msgs := consumeCommitted(t, []string{topic}, len(ids), 2*time.Minute)
	if dups := countDuplicates(t, ids, msgs); dups != 0 {
		t.Errorf("%d rows read twice at read_committed after a kill -9 during the first of three tables", dups)
	}
	if code := r.Stop(t, syscall.SIGTERM, 40*time.Second); code != 0 {
		t.Fatalf("exit %d on SIGTERM", code)
	}

	forced := startRelayNoWait(t, append(args, "--backfill-force")...)
	consume(t, []string{topic}, len(ids), time.Minute)
	time.Sleep(time.Until(forced.started.Add(2 * time.Second)))
	if err := forced.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-forced.done
	if !strings.Contains(forced.LogText(), "backfilling table=public."+a.name) || strings.Contains(forced.LogText(), "backfilling table=public."+b.name) {
		t.Fatalf("the forced run was not killed during the first table:\n%s", testkit.Tail(forced.LogText(), 20))
	}
	r = startRelayNoWait(t, args...)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(r.LogText(), `backfill done" table=public.`+b.name) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(r.LogText(), `backfill done" table=public.`+b.name) {
		t.Errorf("the forced backfill, cut short in the first table, never backfilled the second:\n%s", testkit.Tail(r.LogText(), 20))
	}
	if code := r.Stop(t, syscall.SIGTERM, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
}
