package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// The backfill's order, its stop on a refusal, and setup before it
// (issue 22, items 8 and 14).

// noTimestampColumns is an outbox without a timestamp column, its ids
// random: nothing in a row says when it committed.
const noTimestampColumns = `id uuid primary key, aggregate_type text not null, aggregate_id text not null,
	event_type text not null, payload jsonb not null`

// TestBackfillOrderFollowsCommits: without a timestamp column the backfill
// refuses to guess (exit 1, no slot); with track_commit_timestamp on it
// publishes each aggregate's rows in commit order, whatever their ids.
func TestBackfillOrderFollowsCommits(t *testing.T) {
	o := newOutbox(t, "bforder", noTimestampColumns)
	ctx := context.Background()
	for i := range 10 {
		if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ($1, 'Order', '1', 'Placed', $2)`, o.name), uuid.NewString(), fmt.Sprintf(`{"n": %d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	code, out := runOnce(t, o.args("--backfill-where", "true", "--column-timestamp", "")...)
	if code != 1 || !strings.Contains(lastLine(out), "--backfill-order") {
		t.Errorf("a backfill with nothing to order by: exit %d, last line %q; want exit 1 naming --backfill-order", code, lastLine(out))
	}
	var slots int
	_ = o.db.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&slots)
	if slots != 0 {
		t.Error("the refusal left a slot behind")
	}

	// A server of its own, with commit timestamps.
	own, err := testkit.StartPostgres()
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(func() { _ = own.Stop() })
	db, err := pgxpool.New(ctx, own.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, `ALTER SYSTEM SET track_commit_timestamp = on`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	if db, err = pgxpool.New(ctx, own.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "CREATE TABLE "+o.name+" ("+noTimestampColumns+")"); err != nil {
		t.Fatal(err)
	}
	// One row a transaction, and every tenth transaction three rows of one
	// aggregate (as a service writes Created, Paid, Shipped together).
	const keys, n = 20, 1000
	counters := map[int]int{}
	for i := 0; i < n; {
		key, rows := i%keys, 1
		if i%10 == 0 {
			rows = min(3, n-i)
		}
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			for range rows {
				if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ($1, 'Order', $2, 'Placed', $3)`, o.name),
					uuid.NewString(), fmt.Sprint(key), fmt.Sprintf(`{"n": %d}`, counters[key])); err != nil {
					return err
				}
				counters[key]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		i += rows
	}
	args := append(o.args("--backfill-where", "true", "--column-timestamp", ""), "--postgres-url", own.URL)
	r := startRelayNoWait(t, args...)
	msgs := consume(t, []string{o.name + ".Order"}, n, time.Minute)
	checkKeyOrder(t, msgs)
	if code := r.Stop(t, 15, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	b, _ := os.ReadFile(r.log)
	if !strings.Contains(string(b), "order=commit") {
		t.Errorf("the backfill did not say it ordered by commit time:\n%s", testkit.Tail(string(b), 20))
	}
}

// checkKeyOrder checks that each key's first deliveries count n up from 0.
func checkKeyOrder(t *testing.T, msgs []kafka.Message) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	bad := 0
	for _, m := range sortedByOffset(msgs) {
		id, _ := testkit.Header(m, "id")
		if seen[id] {
			continue
		}
		seen[id] = true
		var p struct{ N int }
		if err := json.Unmarshal(m.Value, &p); err != nil {
			t.Fatal(err)
		}
		if k := string(m.Key); p.N != next[k] {
			if bad++; bad <= 5 {
				t.Errorf("key %s: n=%d arrived when %d was next", k, p.N, next[k])
			}
			next[k] = p.N + 1
		} else {
			next[k]++
		}
	}
	if bad > 5 {
		t.Errorf("... %d events out of order in all", bad)
	}
}

// TestBackfillStopsOnRefusal: a row the broker refuses for good during a
// backfill (larger than its topic's max.message.bytes, --on-invalid=fail)
// stops the relay with exit 1 and the reason, even with the in-flight
// window full behind it; the backfill is not marked done.
func TestBackfillStopsOnRefusal(t *testing.T) {
	o := newOutbox(t, "bfrefused", defaultColumns)
	ctx := context.Background()
	var rows []row
	for i := range 200 {
		payload := fmt.Sprintf(`{"n": %d}`, i)
		if i == 50 {
			payload = fmt.Sprintf(`{"big": %q}`, strings.Repeat("x", 20000))
		}
		rows = append(rows, row{ID: uuid.NewString(), AggregateType: "Order", AggregateID: fmt.Sprint(i % 7), EventType: "Placed", Payload: payload})
	}
	if err := o.insertTx(ctx, rows, true); err != nil {
		t.Fatal(err)
	}
	args := o.args("--backfill-where", "true", "--on-invalid", "fail", "--max-in-flight", "10", "--kafka-compression", "none",
		"--create-topics", "--topic-config", "max.message.bytes=10000")
	r := startRelayNoWait(t, args...)
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		b, _ := os.ReadFile(r.log)
		t.Fatalf("the relay still runs 90 s after the broker refused a row:\n%s", testkit.Tail(string(b), 20))
	}
	b, _ := os.ReadFile(r.log)
	if code := r.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, testkit.Tail(string(b), 10))
	}
	if !strings.Contains(strings.ToLower(lastLine(string(b))), "too large") {
		t.Errorf("the last line does not give the reason: %q", lastLine(string(b)))
	}
	var phase string
	_ = o.db.QueryRow(ctx, `SELECT phase FROM outbox_cdc_backfill WHERE slot = $1`, o.name).Scan(&phase)
	if phase == "done" {
		t.Error("the backfill is recorded done though a row was never published")
	}
}

// TestSetupThenBackfill: `setup --backfill-where` prepares everything but
// the slot, which `run` creates exporting the snapshot its backfill reads;
// so the rows pending before it are all published.
func TestSetupThenBackfill(t *testing.T) {
	o := newOutbox(t, "bfsetup", defaultColumns)
	ids := writePending(t, o.db, o.name, 200, 10, 0)
	args := o.args("--backfill-where", "true")
	setup := append([]string{"setup"}, without(without(without(args, "--status-interval"), "--http-addr"), "--topic")...)
	if code, out := runOnce(t, setup...); code != 0 {
		t.Fatalf("setup: exit %d:\n%s", code, out)
	}
	var slots int
	_ = o.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&slots)
	if slots != 0 {
		t.Error("setup --backfill-where created the slot; run then finds no snapshot to backfill from")
	}
	r := startRelayNoWait(t, args...)
	msgs := consume(t, []string{o.name + ".Order"}, len(ids), time.Minute)
	first, _ := byID(t, msgs)
	missing := 0
	for _, id := range ids {
		if _, ok := first[id]; !ok {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d rows pending before setup never arrived", missing, len(ids))
	}
	if code := r.Stop(t, 15, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
}
