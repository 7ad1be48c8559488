package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
)

// TestRecordTimestamps: two overlapping transactions, the one that
// started first committing last, each writing a row of one key into two
// tables, one relayed with --timestamp column (the default) and one with
// commit. In the partition, in commit order, the column's times run
// backwards and the commit times do not; each record's timestamp is its
// row's created_at, or its transaction's commit time as Postgres reports
// it (read back through a test_decoding slot, independently of pgoutput).
func TestRecordTimestamps(t *testing.T) {
	col, com := newOutbox(t, "tscol", defaultColumns), newOutbox(t, "tscommit", defaultColumns)
	startRelay(t, col.args("--topic-partitions", "1")...)
	startRelay(t, com.args("--topic-partitions", "1", "--timestamp", "commit")...)
	peek := testDecodingSlot(t, col)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	insert := func(tx pgx.Tx, n int) (colID, comID string) {
		colID, comID = uuid.NewString(), uuid.NewString()
		for _, r := range []struct{ table, id string }{{col.name, colID}, {com.name, comID}} {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'acct', 'X', 'e', $2)`, r.table),
				r.id, fmt.Sprintf(`{"n": %d}`, n)); err != nil {
				t.Fatal(err)
			}
		}
		return colID, comID
	}
	first, err := col.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	col1, com1 := insert(first, 1) // created_at: now() of the first transaction
	time.Sleep(50 * time.Millisecond)
	second, err := col.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	col2, com2 := insert(second, 2)
	time.Sleep(50 * time.Millisecond)
	for _, tx := range []pgx.Tx{second, first} { // the later one commits first
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	colMsgs := sortedByOffset(consume(t, []string{col.name + ".acct"}, 2, time.Minute))
	comMsgs := sortedByOffset(consume(t, []string{com.name + ".acct"}, 2, time.Minute))
	commits := peek(ctx)
	created := map[string]time.Time{}
	for _, id := range []string{col1, col2} {
		var at time.Time
		if err := col.db.QueryRow(ctx, fmt.Sprintf(`SELECT created_at FROM %s WHERE id = $1`, col.name), id).Scan(&at); err != nil {
			t.Fatal(err)
		}
		created[id] = at
	}
	check := func(mode string, msgs []kafka.Message, ids []string, want map[string]time.Time, backwards bool) {
		t.Helper()
		if len(msgs) != 2 {
			t.Fatalf("%s: %d records, want 2", mode, len(msgs))
		}
		for i, m := range msgs {
			id, _ := headerOf(m.Headers, "id")
			w, ok := want[id]
			switch {
			case id != ids[i]:
				t.Errorf("%s: record %d is row %s, want %s (commit order)", mode, i, id, ids[i])
			case !ok || !m.Time.Equal(w.Truncate(time.Millisecond)):
				t.Errorf("%s: row %s stamped %s, want %s", mode, id, m.Time.UTC().Format(time.RFC3339Nano), w.UTC().Format(time.RFC3339Nano))
			}
		}
		if went := msgs[1].Time.Before(msgs[0].Time); went != backwards {
			t.Errorf("%s: timestamps %s then %s; going back: %v, want %v", mode, msgs[0].Time.Format(time.StampMilli), msgs[1].Time.Format(time.StampMilli), went, backwards)
		}
		t.Logf("%s: %s then %s in the partition", mode, msgs[0].Time.Format(time.StampMilli), msgs[1].Time.Format(time.StampMilli))
	}
	check("column", colMsgs, []string{col2, col1}, created, true)
	check("commit", comMsgs, []string{com2, com1}, map[string]time.Time{com1: commits[col1], com2: commits[col2]}, false)
}

// testDecodingSlot creates a test_decoding slot beside o's (dropped when
// the test ends) and returns a function that peeks at it: the commit time
// of each of o's rows inserted since, by id, as Postgres reports it.
func testDecodingSlot(t *testing.T, o *outbox) func(context.Context) map[string]time.Time {
	t.Helper()
	ctx := context.Background()
	slot := o.name + "_td"
	if _, err := o.db.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, slot); err != nil {
		t.Fatalf("create a test_decoding slot: %v", err)
	}
	t.Cleanup(func() { _, _ = o.db.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })
	return func(ctx context.Context) map[string]time.Time {
		rows, err := o.db.Query(ctx, `SELECT xid::text, data FROM pg_logical_slot_peek_changes($1, NULL, NULL, 'include-timestamp', '1')`, slot)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		xidOf, at := map[string]string{}, map[string]time.Time{}
		for rows.Next() {
			var xid, data string
			if err := rows.Scan(&xid, &data); err != nil {
				t.Fatal(err)
			}
			if _, rest, ok := strings.Cut(data, ": INSERT: id[uuid]:'"); ok && strings.HasPrefix(data, "table public."+o.name+":") {
				id, _, _ := strings.Cut(rest, "'")
				xidOf[id] = xid
			}
			if _, rest, ok := strings.Cut(data, " (at "); ok && strings.HasPrefix(data, "COMMIT ") {
				at[xid] = parsePgTime(t, strings.TrimSuffix(rest, ")"))
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		out := map[string]time.Time{}
		for id, xid := range xidOf {
			out[id] = at[xid]
		}
		return out
	}
}

// parsePgTime reads a timestamptz as Postgres prints it (DateStyle ISO).
func parsePgTime(t *testing.T, s string) time.Time {
	t.Helper()
	for _, layout := range []string{"2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07:00:00"} {
		if at, err := time.Parse(layout, s); err == nil {
			return at
		}
	}
	t.Fatalf("unreadable commit time %q", s)
	return time.Time{}
}
