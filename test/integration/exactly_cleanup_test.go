package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestExactlyOnceCleanupAfterCommit: in exactly-once delivery, --cleanup
// deletes a row only once the Kafka transaction holding its event has
// committed (a long --transaction-interval leaves seconds between the
// produce acknowledgement and the commit), the last transaction of a
// SIGTERM included; a crash between a commit and the delete (the slot
// not yet confirmed past it) leaves the rows to the next run, which deletes
// them without publishing their events again (but keeps a row too large
// for its dead letter to hold its value); and while the delete fails
// after a commit, the slot is not confirmed past its rows.
func TestExactlyOnceCleanupAfterCommit(t *testing.T) {
	slowFault(t)
	o := newOutbox(t, "eosclean", defaultColumns)
	topic := o.name + ".order"
	args := exactlyArgs(o, "--cleanup", "delete-after-publish", "--transaction-interval", "5s",
		"--dlq-topic", o.name+".dlq", "--max-message-bytes", "16384")
	r := startRelay(t, args...)

	// A row inserted just after a commit waits the whole interval for the
	// next one: it must stay in the table until its event is readable.
	first := o.insertOne(t, uuid.NewString(), "order", "a", "created", `{}`, nil)
	if !seesCommitted(t, topic, first, 30*time.Second) {
		t.Fatalf("event %s not readable at read_committed after 30 s", first)
	}
	second := o.insertOne(t, uuid.NewString(), "order", "a", "created", `{}`, nil)
	deadline := time.Now().Add(30 * time.Second)
	for o.tableIDs(t)[second] {
		if time.Now().After(deadline) {
			t.Fatalf("row %s still in the table after 30 s", second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The commit markers reach the partition just after EndTxn answers.
	if !seesCommitted(t, topic, second, 1500*time.Millisecond) {
		t.Errorf("row %s was deleted, but its event is not readable at read_committed: deleted before the kafka commit", second)
	}

	// SIGTERM with a transaction open: its commit, then its rows' delete.
	last := o.insertOne(t, uuid.NewString(), "order", "a", "created", `{}`, nil)
	time.Sleep(300 * time.Millisecond) // published, not committed
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, testkit.Tail(r.LogText(), 30))
	}
	if o.tableIDs(t)[last] {
		t.Errorf("row %s still in the table after SIGTERM", last)
	}
	if !seesCommitted(t, topic, last, 10*time.Second) {
		t.Errorf("event %s of the last transaction not readable at read_committed after SIGTERM", last)
	}

	// A crash after the commit, before the delete: a run without --cleanup
	// commits and is killed before it confirms the slot (1m intervals).
	plain := append(without(without(args, "--cleanup"), "--status-interval"), "--status-interval", "1m", "--confirm-interval", "1m")
	r = startRelay(t, plain...)
	w, counters := newWritten(), map[string]int{}
	insertRows(t, o, w, makeRows(300, 20, "order", counters), 10)
	// Too large: dead-lettered without its value, and kept (the only copy).
	big := o.insertOne(t, uuid.NewString(), "order", "a", "created", `{"x":"`+strings.Repeat("x", 20000)+`"}`, nil)
	kept := map[string]bool{big: true}
	end := o.CurrentLSN(t)
	consumeCommitted(t, []string{topic}, len(w.committed)+3, time.Minute)
	consumeCommitted(t, []string{o.name + ".dlq"}, 1, time.Minute)
	if got := o.Confirmed(t); got >= end {
		t.Fatalf("the slot is confirmed at %s, past the rows (%s): nothing for the next run to replay", got, end)
	}
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	r = startRelay(t, args...)
	o.waitEmpty(t, kept, 30*time.Second)
	waitConfirmed(t, o, end, 30*time.Second)
	if !o.tableIDs(t)[big] {
		t.Errorf("the too-large row, dead-lettered without its value, was deleted by the restart: its payload is gone")
	}
	if n := r.Metric(t, "outbox_cdc_rows_deleted_total"); n != float64(len(w.committed)) {
		t.Errorf("outbox_cdc_rows_deleted_total %v after the restart, want %d", n, len(w.committed))
	}

	// The delete fails after a commit (a trigger refuses it): the slot stays
	// behind the rows while it does; once it passes, every row goes.
	// One Postgres transaction: after the quiet spell it commits at once,
	// alone, and the next commit waits for its rows' delete.
	o.blockDeletes(t, true)
	insertRows(t, o, w, makeRows(50, 10, "order", counters), 50)
	end = o.CurrentLSN(t)
	consumeCommitted(t, []string{topic}, len(w.committed)+3, time.Minute)
	time.Sleep(3 * time.Second) // --confirm-interval is 20ms
	if got := o.Confirmed(t); got >= end {
		t.Errorf("the slot is confirmed at %s, past rows whose delete fails (%s)", got, end)
	}
	if left := len(o.tableIDs(t)); left != 51 {
		t.Errorf("%d rows in the table while deletes fail, want 51", left)
	}
	o.blockDeletes(t, false)
	o.waitEmpty(t, kept, time.Minute)
	waitConfirmed(t, o, end, time.Minute)

	ids := []string{first, second, last}
	for id := range w.committed {
		ids = append(ids, id)
	}
	msgs := consumeCommitted(t, []string{topic}, len(ids), time.Minute)
	if dups := countDuplicates(t, ids, msgs); dups != 0 {
		t.Errorf("%d events read twice at read_committed: the restart published what the checkpoint held", dups)
	}
}

// blockDeletes makes every DELETE from o's table fail (on), or lets it
// pass again.
func (o *outbox) blockDeletes(t *testing.T, on bool) {
	t.Helper()
	table, fn := pgx.Identifier{o.name}.Sanitize(), pgx.Identifier{o.name + "_block"}.Sanitize()
	stmts := []string{"DROP TRIGGER " + fn + " ON " + table, "DROP FUNCTION " + fn}
	if on {
		stmts = []string{
			"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'deletes blocked by the test'; END$$",
			"CREATE TRIGGER " + fn + " BEFORE DELETE ON " + table + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
		}
	}
	for _, q := range stmts {
		if _, err := o.db.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// seesCommitted reports whether a read_committed consumer of topic reads
// the event with id within timeout.
func seesCommitted(t *testing.T, topic, id string, timeout time.Duration) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(broker.Brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil {
		seen := false
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				seen = seen || h.Key == "id" && string(h.Value) == id
			}
		})
		if seen {
			return true
		}
	}
	return false
}
