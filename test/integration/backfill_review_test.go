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

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

// The backfill's holes found by review (issue 22, items 1, 5, 7, 8, 14).

// TestBackfillWhereRunsNothing: a --backfill-where that tries to run a
// statement, read another table or call a volatile function is refused by
// check and by run, and nothing it names runs.
func TestBackfillWhereRunsNothing(t *testing.T) {
	o := newOutbox(t, "bfsql", defaultColumns)
	ctx := context.Background()
	secret := o.name + "_secret"
	pwned := o.name + "_pwned"
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (%s); INSERT INTO %s VALUES (gen_random_uuid(), 'Secret', 's', 'Leaked', '{}', NULL, now())`,
		secret, defaultColumns, secret)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = o.db.Exec(ctx, "DROP TABLE IF EXISTS "+secret+", "+pwned) })
	if err := o.insertTx(ctx, []row{{ID: uuid.NewString(), AggregateType: "Order", AggregateID: "1", EventType: "Placed", Payload: `{}`}}, true); err != nil {
		t.Fatal(err)
	}
	for _, attack := range []string{
		fmt.Sprintf("true); COMMIT; CREATE TABLE %s(x int); SELECT (1", pwned),
		fmt.Sprintf("1=1) UNION SELECT * FROM %s WHERE (true", secret),
		fmt.Sprintf("id IN (SELECT id FROM %s)", secret),
		fmt.Sprintf("EXISTS (TABLE %s)", secret),
		"random() >= 0",
		"set_config('outbox.x', '1', false) = '1'",
		"pg_catalog.pg_sleep(0) IS NOT NULL",
	} {
		code, out := runOnce(t, checkArgs(o.args("--backfill-where", attack))...)
		if code == 0 || strings.Contains(out, "[ok  ] backfill") {
			t.Errorf("check accepted --backfill-where %q (exit %d):\n%s", attack, code, out)
		}
		code, out = runOnce(t, o.args("--backfill-where", attack)...)
		if code == 0 || !strings.Contains(lastLine(out), "--backfill-where") {
			t.Errorf("run with --backfill-where %q: exit %d, last line %q; want a refusal naming the flag", attack, code, lastLine(out))
		}
	}
	var exists bool
	_ = o.db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pwned).Scan(&exists)
	if exists {
		t.Error("a statement inside --backfill-where ran: the table it creates exists")
	}
	var slots int
	_ = o.db.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&slots)
	if slots != 0 {
		t.Errorf("a refused predicate left %d slots", slots)
	}
	// What a predicate may be: strings and comments holding the characters
	// the guard watches for, stable functions, casts.
	good := `aggregate_type <> E'it\'s ) ;' AND payload::text <> $$a;b$$ /* ) */ AND created_at <= now() AND lower(event_type) <> 'x'`
	code, out := runOnce(t, checkArgs(o.args("--backfill-where", good))...)
	if !strings.Contains(out, "[ok  ] backfill of public."+o.name) {
		t.Errorf("check refused a harmless predicate (exit %d):\n%s", code, out)
	}
}

// checkArgs is `check` with run's flags, less those check does not take.
func checkArgs(args []string) []string {
	return append([]string{"check"}, without(without(args, "--status-interval"), "--http-addr")...)
}

// nullableColumns is defaultColumns with a nullable timestamp.
const nullableColumns = `id uuid primary key, aggregate_type text not null, aggregate_id text not null,
	event_type text not null, payload jsonb not null, headers jsonb, created_at timestamptz`

// writePending commits n rows, one per transaction over keys aggregates,
// payload {"n": k} counting each aggregate's rows; every nullEvery-th row
// has a NULL created_at (0: none). It returns the ids.
func writePending(t *testing.T, db *pgxpool.Pool, table string, n, keys, nullEvery int) []string {
	t.Helper()
	ctx := context.Background()
	counters := map[int]int{}
	var ids []string
	for i := range n {
		id, key := uuid.NewString(), i%keys
		var ts any = time.Now()
		if nullEvery > 0 && i%nullEvery == 0 {
			ts = nil
		}
		if _, err := db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ($1, 'Order', $2, 'Placed', $3, $4)`, table), id, fmt.Sprint(key), fmt.Sprintf(`{"n": %d}`, counters[key]), ts); err != nil {
			t.Fatal(err)
		}
		counters[key]++
		ids = append(ids, id)
	}
	return ids
}

// killAfter waits until want records reached topic and r ran for at
// least ran, then kills r with SIGKILL while its backfill still runs.
func killAfter(t *testing.T, o *outbox, r *relay, topic string, want int, ran time.Duration) {
	t.Helper()
	consume(t, []string{topic}, want, time.Minute)
	time.Sleep(time.Until(r.started.Add(ran)))
	var active bool
	_ = o.db.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&active)
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	if active {
		t.Fatal("the backfill was over when the relay was killed: the test proves nothing")
	}
}

// TestBackfillNullTimestampsResumed: rows whose timestamp column is NULL
// are backfilled, also when a kill -9 cuts the backfill short before,
// among, and after them.
func TestBackfillNullTimestampsResumed(t *testing.T) {
	o := newOutbox(t, "bfnull", nullableColumns)
	ids := writePending(t, o.db, o.name, 3000, 20, 10)
	topic := o.name + ".Order"
	// About 200 rows/s: the first kill comes among the NULLs (read first),
	// the second past them, after progress was recorded (an earlier
	// version recorded it every 5 s, and read NULLs last).
	args := o.args("--backfill-where", "true", "--max-in-flight", "10", "--batch-timeout", "50ms")
	killAfter(t, o, startRelayNoWait(t, args...), topic, 100, 0)
	killAfter(t, o, startRelayNoWait(t, args...), topic, 1000, 7*time.Second)
	r := startRelayNoWait(t, args...)
	msgs := consume(t, []string{topic}, len(ids), 2*time.Minute)
	first, dups := byID(t, msgs)
	for _, id := range ids {
		if _, ok := first[id]; !ok {
			t.Errorf("row %s never arrived", id)
		}
	}
	if code := r.stop(t, 15, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	t.Logf("%d rows, a tenth with a NULL timestamp, two kills: all arrived, %d duplicates", len(ids), dups)
}

// TestBackfillResumeReadsItsSnapshot: a backfill killed while writers keep
// committing resumes with exactly the rows its first snapshot saw; rows
// committed after the slot come once, from the slot. Duplicates come only
// from events in flight at the kill (at most --max-in-flight, plus those
// acknowledged since the last recorded progress).
func TestBackfillResumeReadsItsSnapshot(t *testing.T) {
	o := newOutbox(t, "bfsnap", defaultColumns)
	ids := writePending(t, o.db, o.name, 5000, 50, 0)
	topic := o.name + ".Order"
	args := o.args("--backfill-where", "true", "--max-in-flight", "10", "--batch-timeout", "20ms")
	r := startRelayNoWait(t, args...)
	waitSlot(t, o)
	consume(t, []string{topic}, 1, time.Minute) // the slot is consistent: what follows is streamed
	more := map[int]int{}
	ids = append(ids, writeMore(t, o, 500, more)...) // during the backfill
	killAfter(t, o, r, topic, 1500, 7*time.Second)
	ids = append(ids, writeMore(t, o, 500, more)...) // while it is down
	r2 := startRelayNoWait(t, args...)
	msgs := consume(t, []string{topic}, len(ids), 2*time.Minute)
	first, dups := byID(t, msgs)
	for _, id := range ids {
		if _, ok := first[id]; !ok {
			t.Errorf("row %s never arrived", id)
		}
	}
	checkKeyOrder(t, msgs)
	for _, line := range strings.Split(r2.logText(), "\n") {
		if strings.Contains(line, "backfill") {
			t.Log(line)
		}
	}
	if dups > 40 {
		t.Errorf("%d rows published twice after one kill -9 with 10 in flight; want only those in flight at the kill", dups)
	}
	t.Logf("kill -9 during the backfill under writes, then a restart: %d rows, none lost, %d duplicates", len(ids), dups)
}

// writeMore commits n more rows in o, one per transaction over 50 keys,
// continuing each aggregate's count (more, from 100) where writePending
// left it after 5,000 rows.
func writeMore(t *testing.T, o *outbox, n int, more map[int]int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := uuid.NewString()
		key := i % 50
		if _, err := o.db.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ($1, 'Order', $2, 'Placed', $3, now())`, o.name), id, fmt.Sprint(key), fmt.Sprintf(`{"n": %d}`, 100+more[key])); err != nil {
			t.Fatal(err)
		}
		more[key]++
		ids = append(ids, id)
	}
	return ids
}

// waitSlot waits until o's slot exists.
func waitSlot(t *testing.T, o *outbox) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		var exists bool
		_ = o.db.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, o.name).Scan(&exists)
		if exists {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no slot a minute after the relay started")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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
	own, err := harness.StartPostgres()
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
	if code := r.stop(t, 15, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	b, _ := os.ReadFile(r.log)
	if !strings.Contains(string(b), "order=commit") {
		t.Errorf("the backfill did not say it ordered by commit time:\n%s", tail(string(b), 20))
	}
}

// checkKeyOrder checks that each key's first deliveries count n up from 0.
func checkKeyOrder(t *testing.T, msgs []kafka.Message) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	bad := 0
	for _, m := range sortedByOffset(msgs) {
		id, _ := header(m, "id")
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
		t.Fatalf("the relay still runs 90 s after the broker refused a row:\n%s", tail(string(b), 20))
	}
	b, _ := os.ReadFile(r.log)
	if code := r.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, tail(string(b), 10))
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
	if code := r.stop(t, 15, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
}
