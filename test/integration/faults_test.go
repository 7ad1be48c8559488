package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// rows returns n rows for aggregates agg-0 .. agg-(aggs-1) of type typ, with
// n counting up per aggregate from start[agg].
func makeRows(n, aggs int, typ string, counters map[string]int) []row {
	rows := make([]row, n)
	for i := range rows {
		agg := fmt.Sprintf("agg-%d", i%aggs)
		rows[i] = row{
			ID: uuid.NewString(), AggregateType: typ, AggregateID: agg, EventType: "e",
			Payload: fmt.Sprintf(`{"n": %d}`, counters[agg]),
		}
		counters[agg]++
	}
	return rows
}

// insertRows commits rows in transactions of txSize, recording them in w.
func insertRows(t *testing.T, o *outbox, w *written, rows []row, txSize int) {
	t.Helper()
	if err := insertAll(o, w, rows, txSize, 0); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// insertAll is insertRows for a goroutine of the test's own; pause spaces
// the transactions.
func insertAll(o *outbox, w *written, rows []row, txSize int, pause time.Duration) error {
	for i := 0; i < len(rows); i += txSize {
		time.Sleep(pause)
		batch := rows[i:min(i+txSize, len(rows))]
		if err := o.commitRiding(batch); err != nil {
			return err
		}
		w.record(batch, true)
	}
	return nil
}

// commitRiding commits rows in one transaction, riding out the faults the
// tests cause: a Postgres restart or a cut connection. After a failure it
// asks a fresh connection whether the transaction is in (its rows are all
// there or none are) and retries only when it is not, so a retry never
// inserts a row twice. Errors that are not about the connection (SQL errors)
// are returned at once.
func (o *outbox) commitRiding(rows []row) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	deadline := time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ {
		err := o.insertTx(context.Background(), rows, true)
		if err == nil || !connectionFault(err) {
			return err
		}
		// Did the commit land before the connection went? Ask until a
		// connection answers.
		for {
			var n int
			qerr := o.db.QueryRow(context.Background(),
				fmt.Sprintf("SELECT count(*) FROM %s WHERE id::text = ANY($1)", o.name), ids).Scan(&n)
			if qerr == nil {
				if n == len(rows) {
					return nil
				}
				if n != 0 {
					return fmt.Errorf("%d of %d rows of one transaction present after %v", n, len(rows), err)
				}
				break
			}
			if !connectionFault(qerr) || time.Now().After(deadline) {
				return fmt.Errorf("insert: %w; then asking whether it committed: %w", err, qerr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("insert still failing after a minute (%d attempts): %w", attempt+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// connectionFault reports whether err is about the connection rather than
// the statement: the server shutting down or restarting (SQLSTATE class 57),
// a connection exception (class 08), or no answer from the server at all.
func connectionFault(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57") || strings.HasPrefix(pgErr.Code, "08")
	}
	return !errors.Is(err, context.Canceled)
}

// insertInBackground runs insertAll in a goroutine; wait returns its error.
func insertInBackground(o *outbox, w *written, rows []row, txSize int, pause time.Duration) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- insertAll(o, w, rows, txSize, pause) }()
	return func() error { return <-done }
}

func newWritten() *written {
	return &written{committed: map[string]row{}, rolledBack: map[string]bool{}}
}

// record notes rows as committed, or as rolled back, once their
// transaction has ended.
func (w *written) record(rows []row, commit bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		if commit {
			w.committed[r.ID] = r
		} else {
			w.rolledBack[r.ID] = true
		}
	}
}

// killMidway kills r (SIGKILL) while rows are still being written, waits
// for it to exit, and returns how many rows were committed by then. Had all
// total rows been committed, the kill would prove nothing: the test fails.
func killMidway(t *testing.T, r *relay, w *written, total int) int {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	w.mu.Lock()
	atKill := len(w.committed)
	w.mu.Unlock()
	if atKill == total {
		t.Fatalf("every row was already committed when outbox-cdc was killed: the test proves nothing")
	}
	return atKill
}

// TestAckGating stops the broker (SIGSTOP) while rows are inserted: the slot
// must not confirm past the last acknowledged transaction, and a relay
// killed meanwhile must deliver everything after the broker returns.
func TestAckGating(t *testing.T) {
	o := newOutbox(t, "gating", defaultColumns)
	r := startRelay(t, o.args()...)
	w, counters := newWritten(), map[string]int{}

	insertRows(t, o, w, makeRows(500, 20, "order", counters), 50)
	consume(t, []string{o.name + ".order"}, 500, time.Minute)
	acked := o.CurrentLSN(t)
	waitConfirmed(t, o, acked, 30*time.Second)

	if err := broker.Pause(); err != nil {
		t.Fatalf("pause broker: %v", err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = broker.Resume()
		}
	}()
	insertRows(t, o, w, makeRows(500, 20, "order", counters), 50)
	written := o.CurrentLSN(t) // at least the end of the last unacked commit
	// Several status intervals pass; nothing may be confirmed past the
	// acked transactions.
	for range 8 {
		time.Sleep(500 * time.Millisecond)
		if c := o.Confirmed(t); c >= written {
			t.Fatalf("slot confirmed %s while the broker was stopped; the unacked transactions end by %s", c, written)
		}
	}
	t.Logf("broker stopped: slot held at %s (acked up to %s, unacked rows end by %s)", o.Confirmed(t), acked, written)

	// A crash now must lose nothing: the events were never confirmed.
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	if err := broker.Resume(); err != nil {
		t.Fatalf("resume broker: %v", err)
	}
	resumed = true
	startRelay(t, o.args()...)
	msgs := consume(t, []string{o.name + ".order"}, len(w.committed), 2*time.Minute)
	dups := checkDelivered(t, o, w, msgs)
	// 60 s: past the last outbox commit an idle relay confirms further only
	// when the server's keepalive comes (wal_sender_timeout/2).
	waitConfirmed(t, o, written, 60*time.Second)
	t.Logf("after the broker returned: %d events delivered, %d duplicates", len(w.committed), dups)
}

// waitConfirmed waits until the slot confirms at least want.
func waitConfirmed(t *testing.T, o *outbox, want pglogrepl.LSN, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for o.Confirmed(t) < want {
		if time.Now().After(deadline) {
			t.Fatalf("slot confirmed %s, short of %s after %s", o.Confirmed(t), want, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCrashMidStream kills outbox-cdc with SIGKILL in the middle of a
// 20,000-row stream and restarts it: every event arrives.
func TestCrashMidStream(t *testing.T) {
	o := newOutbox(t, "crash", defaultColumns)
	r := startRelay(t, o.args("--max-in-flight", "2000")...)
	w, counters := newWritten(), map[string]int{}

	// 200 transactions over about 6 s; the kill lands once a quarter of
	// them is in Kafka, with the rest still being written.
	wait := insertInBackground(o, w, makeRows(20000, 100, "order", counters), 100, 30*time.Millisecond)
	consume(t, []string{o.name + ".order"}, 5000, time.Minute)
	atKill := killMidway(t, r, w, 20000)
	t.Logf("killed outbox-cdc with %d of 20000 rows committed", atKill)
	if err := wait(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	startRelay(t, o.args()...)
	msgs := consume(t, []string{o.name + ".order"}, len(w.committed), 2*time.Minute)
	dups := checkDelivered(t, o, w, msgs)
	t.Logf("kill -9 mid-stream: %d events, all delivered; %d duplicates", len(w.committed), dups)
}

// TestRestartAfterSIGTERM stops outbox-cdc cleanly under load: it exits 0,
// and a restart re-delivers at most one in-flight window.
func TestRestartAfterSIGTERM(t *testing.T) {
	const window = 500
	o := newOutbox(t, "sigterm", defaultColumns)
	args := o.args("--max-in-flight", fmt.Sprint(window))
	r := startRelay(t, args...)
	w, counters := newWritten(), map[string]int{}

	wait := insertInBackground(o, w, makeRows(10000, 50, "order", counters), 100, 20*time.Millisecond)
	consume(t, []string{o.name + ".order"}, 2000, time.Minute)
	if code := r.Stop(t, syscall.SIGTERM, 40*time.Second); code != 0 {
		t.Fatalf("outbox-cdc exited %d on SIGTERM, want 0", code)
	}
	if err := wait(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	startRelay(t, args...)
	msgs := consume(t, []string{o.name + ".order"}, len(w.committed), 2*time.Minute)
	dups := checkDelivered(t, o, w, msgs)
	t.Logf("SIGTERM then restart: %d events delivered, %d duplicates (window %d)", len(w.committed), dups, window)
	if dups > window {
		t.Errorf("%d duplicates after a clean stop, want at most one window (%d)", dups, window)
	}
}

// TestDebeziumColumns relays a table with Debezium's outbox column names,
// configured through the column flags alone.
func TestDebeziumColumns(t *testing.T) {
	o := newOutbox(t, "dbz", `
		id uuid primary key,
		aggregatetype varchar(255) not null,
		aggregateid varchar(255) not null,
		type varchar(255) not null,
		payload jsonb`)
	startRelay(t, o.args(
		"--column-aggregate-type", "aggregatetype",
		"--column-aggregate-id", "aggregateid",
		"--column-event-type", "type",
	)...)
	id := uuid.NewString()
	_, err := o.db.Exec(context.Background(),
		`INSERT INTO `+o.name+` (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-17', 'OrderCreated', '{"total": 42}')`, id)
	if err != nil {
		t.Fatal(err)
	}
	msgs := consume(t, []string{o.name + ".Order"}, 1, time.Minute)
	m := msgs[0]
	if string(m.Key) != "o-17" || string(m.Value) != `{"total": 42}` {
		t.Errorf("got key %q value %q, want o-17 and the payload", m.Key, m.Value)
	}
	for k, want := range map[string]string{"id": id, "event_type": "OrderCreated", "aggregate_type": "Order"} {
		if got, _ := testkit.Header(m, k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}
