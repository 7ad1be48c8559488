package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The backfill's holes found by review (issue 22, items 1, 5 and 7).

// TestBackfillWhereRunsNothing: a --backfill-where that tries to run a
// statement, read another table or call a function off the allow-list is
// refused by check and by run, and nothing it names runs.
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
		fmt.Sprintf("table_to_xml('%s'::regclass, true, false, '')::text like '%%Leaked%%'", secret),
		"(database_to_xml(true, false, '')::text)::int = 1",
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
	// What a predicate may be: strings holding the characters the guard
	// watches for, allowed functions, casts.
	good := `aggregate_type <> E'it\'s ) ;' AND payload::text <> 'a;b--c/*' AND created_at <= now() - interval '1 day' AND lower(event_type) <> 'x' AND payload->>'k' IS NULL`
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
	if code := r.Stop(t, 15, 40*time.Second); code != 0 {
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
	// Rows of the first snapshot updated meanwhile (a new xmin) are still
	// the backfill's: the slot does not stream updates.
	if _, err := o.db.Exec(context.Background(), fmt.Sprintf(`UPDATE %s SET headers = '{"touched": "yes"}'`, o.name)); err != nil {
		t.Fatal(err)
	}
	r2 := startRelayNoWait(t, args...)
	msgs := consume(t, []string{topic}, len(ids), 2*time.Minute)
	first, dups := byID(t, msgs)
	for _, id := range ids {
		if _, ok := first[id]; !ok {
			t.Errorf("row %s never arrived", id)
		}
	}
	checkKeyOrder(t, msgs)
	for _, line := range strings.Split(r2.LogText(), "\n") {
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
