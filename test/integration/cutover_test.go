package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// The work-coordinator table (rows name their topic, a nullable ordering
// key, a status column) switched from a poller to outbox-cdc.

func coordinatorArgs(o *outbox, extra ...string) []string {
	return legacyArgs(o, append([]string{
		"--column-id", "message_id", "--column-event-type", "message_type", "--column-aggregate-id", "stream_key", "--null-key", "allow",
		"--column-headers", "metadata", "--column-timestamp", "created_at", "--topic", "{topic}",
		"--header-column", "correlation_id", "--header-column", "causation_id",
		"--cleanup", "mark", "--mark", "status='Published'", "--mark", "published_at=now()",
		"--mark-dead", "status='Failed'", "--mark-dead", "last_error=reason",
	}, extra...)...)
}

// coordinator writes rows the way the application does, each key's rows
// carrying the key's counter n so that order per key can be checked.
type coordinator struct {
	o     *outbox
	topic string

	mu       sync.Mutex
	counters map[string]int
	ids      map[string]string // id → status when written
}

func newCoordinator(o *outbox) *coordinator {
	return &coordinator{o: o, topic: o.name + ".orders", counters: map[string]int{}, ids: map[string]string{}}
}

// write commits n rows in transactions of 10, with status, over keys
// keys (a nil stream_key every 17th row), and returns their ids.
func (c *coordinator) write(ctx context.Context, n, keys int, status string) ([]string, error) {
	var ids []string
	for start := 0; start < n; start += 10 {
		batch := &pgx.Batch{}
		var mine []string
		c.mu.Lock()
		for i := start; i < min(start+10, n); i++ {
			key := fmt.Sprintf("stream-%d", i%keys)
			var streamKey any = key
			if i%17 == 0 {
				streamKey, key = nil, "" // a null key: order is not kept for these
			}
			id := uuid.NewString()
			payload := fmt.Sprintf(`{"n": %d, "key": %q}`, c.counters[key], key)
			c.counters[key]++
			batch.Queue(fmt.Sprintf(`INSERT INTO %s (message_id, correlation_id, message_type, payload, topic, stream_key, partition_number, status, metadata)
				VALUES ($1, $2, 'OrderPlaced', $3, $4, $5, 0, $6, $7)`, c.o.name), id, uuid.NewString(), payload, c.topic, streamKey, status,
				map[bool]any{true: `{"traceparent": "00-abc-def-01"}`, false: nil}[i%2 == 0])
			mine = append(mine, id)
		}
		c.mu.Unlock()
		if err := pgx.BeginFunc(ctx, c.o.db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, batch).Close() }); err != nil {
			return ids, err
		}
		c.mu.Lock()
		for _, id := range mine {
			c.ids[id] = status
		}
		c.mu.Unlock()
		ids = append(ids, mine...)
	}
	return ids, nil
}

// checkCutover: every row written not yet Published arrived, none written
// Published did, per key the first deliveries count up, and every row ends
// Published. It returns the duplicates.
func (c *coordinator) checkCutover(t *testing.T, msgs []kafka.Message) int {
	t.Helper()
	first, dups := byID(t, msgs)
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := 0
	for id, status := range c.ids {
		_, arrived := first[id]
		switch {
		case status == "Published" && arrived:
			t.Errorf("row %s, Published before the cutover, was published again", id)
		case status != "Published" && !arrived:
			t.Errorf("row %s (%s) never arrived", id, status)
		}
		if status != "Published" {
			pending++
		}
	}
	next := map[string]int{}
	seen := map[string]bool{}
	for _, m := range sortedByOffset(msgs) {
		id, _ := testkit.Header(m, "id")
		if seen[id] || m.Key == nil {
			continue
		}
		seen[id] = true
		var p struct{ N int }
		if err := json.Unmarshal(m.Value, &p); err != nil {
			t.Fatal(err)
		}
		if k := string(m.Key); p.N != next[k] {
			t.Errorf("key %s: n=%d first arrived when %d was next", k, p.N, next[k])
			next[k] = p.N + 1
		} else {
			next[k]++
		}
	}
	waitRows(t, c.o, fmt.Sprintf(`SELECT count(*) FROM %s WHERE status = 'Published' AND published_at IS NOT NULL`, c.o.name), len(c.ids), "rows Published")
	t.Logf("%d pending rows arrived once or more (%d duplicates), %d Published before the cutover did not", pending, dups, len(c.ids)-pending)
	return dups
}

// TestCoordinatorOutbox: rows route to the topic they name, stream_key is
// the key (NULL: a null key), metadata members and correlation columns are
// headers; published rows become Published, a dead letter Failed.
func TestCoordinatorOutbox(t *testing.T) {
	o := newOutbox(t, "coord", workCoordinatorColumns)
	startRelay(t, coordinatorArgs(o)...)
	c := newCoordinator(o)
	ctx := context.Background()
	if _, err := c.write(ctx, 200, 7, "Stored"); err != nil {
		t.Fatal(err)
	}
	var rolledBack string
	_ = pgx.BeginFunc(ctx, o.db, func(tx pgx.Tx) error {
		rolledBack = uuid.NewString()
		_, _ = tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (message_id, correlation_id, message_type, payload, topic, partition_number) VALUES ($1, $2, 'X', '{}', $3, 0)`, o.name),
			rolledBack, uuid.NewString(), c.topic)
		return errRollback
	})
	bad := uuid.NewString()
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (message_id, correlation_id, message_type, payload, topic, stream_key, partition_number)
		VALUES ($1, $2, 'X', '{}', 'no such topic!', 'k', 0)`, o.name), bad, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	msgs := consume(t, []string{c.topic}, 200, time.Minute)
	c.checkCutover(t, msgs)
	first, _ := byID(t, msgs)
	if _, ok := first[rolledBack]; ok {
		t.Error("a rolled-back row arrived")
	}
	rows, err := o.db.Query(ctx, fmt.Sprintf(`SELECT message_id::text, payload::text, stream_key, correlation_id::text, metadata IS NOT NULL FROM %s WHERE message_id <> $1`, o.name), bad)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, payload, corr string
		var key *string
		var meta bool
		if err := rows.Scan(&id, &payload, &key, &corr, &meta); err != nil {
			t.Fatal(err)
		}
		m := first[id]
		if string(m.Value) != payload || (key == nil) != (m.Key == nil) || key != nil && *key != string(m.Key) {
			t.Errorf("row %s: value %q key %q, want %q and %v", id, m.Value, m.Key, payload, key)
		}
		if got, _ := testkit.Header(m, "correlation_id"); got != corr {
			t.Errorf("row %s correlation_id header %q, want %q", id, got, corr)
		}
		if got, ok := testkit.Header(m, "traceparent"); meta != ok || ok && got != "00-abc-def-01" {
			t.Errorf("row %s traceparent %q (present %v), metadata set %v", id, got, ok, meta)
		}
	}
	waitRows(t, o, fmt.Sprintf(`SELECT count(*) FROM %s WHERE message_id = '%s' AND status = 'Failed' AND last_error = 'invalid_topic'`, o.name, bad), 1, "the unroutable row Failed")
}

// cutoverStart writes what a poller leaves behind: 1,000 rows it Published
// and 5,000 still Stored.
func cutoverStart(t *testing.T, c *coordinator) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.write(ctx, 1000, 50, "Published"); err != nil {
		t.Fatal(err)
	}
	// The poller published them: what it leaves is the counters after them.
	if _, err := c.o.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET published_at = now()`, c.o.name)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.counters = map[string]int{}
	c.mu.Unlock()
	if _, err := c.write(ctx, 5000, 50, "Stored"); err != nil {
		t.Fatal(err)
	}
}

// TestCutover switches from the poller under load: 5,000 rows pending and
// 1,000 published at the start, 5,000 more written during the backfill.
// Then a restart with the same flags publishes nothing again.
func TestCutover(t *testing.T) {
	o := newOutbox(t, "cutover", workCoordinatorColumns)
	c := newCoordinator(o)
	cutoverStart(t, c)
	// A backfill slow enough (10 in flight, a request per 20 ms) that the
	// writers' 5,000 rows all commit while it runs.
	args := coordinatorArgs(o, "--backfill-where", "status <> 'Published'", "--max-in-flight", "10", "--batch-timeout", "20ms")
	r := startRelayNoWait(t, args...)
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); ; {
		var exists bool
		_ = o.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, o.name).Scan(&exists)
		if exists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no slot a minute after the relay started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.write(ctx, 5000, 50, "Stored"); err != nil {
		t.Fatal(err)
	}
	var active bool
	_ = o.db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&active)
	if active {
		t.Fatal("the backfill was over before the writers were: the test proves nothing")
	}
	r.WaitStreaming(t, pg.URL)
	msgs := consume(t, []string{c.topic}, 10000, 2*time.Minute)
	if dups := c.checkCutover(t, msgs); dups != 0 {
		t.Errorf("%d rows both backfilled and streamed, want none", dups)
	}
	if code := r.Stop(t, 15, 40*time.Second); code != 0 {
		t.Fatalf("exit %d on SIGTERM", code)
	}
	_, before, _ := endOffsets(c.topic)
	r2 := startRelay(t, args...)
	time.Sleep(3 * time.Second)
	_, after, _ := endOffsets(c.topic)
	if after != before {
		t.Errorf("a restart with the same flags published %d records again", after-before)
	}
	if code := r2.Stop(t, 15, 40*time.Second); code != 0 {
		t.Fatalf("exit %d on SIGTERM", code)
	}
	b, _ := os.ReadFile(r2.log)
	if n := strings.Count(string(b), "the backfill was done before"); n != 1 {
		t.Errorf("the restart logged %d lines saying the backfill was done before, want 1:\n%s", n, testkit.Tail(string(b), 20))
	}
	code, out := runOnce(t, "status", "--postgres-url", pg.URL, "--table", "public."+o.name, "--slot", o.name, "--publication", o.name)
	// The backfill took exactly the rows committed before the slot.
	if code != 0 || !strings.Contains(out, ": done, 5000 of 5000 rows") {
		t.Errorf("status (exit %d) does not show the finished backfill of the 5,000 pending rows:\n%s", code, out)
	}
	t.Logf("status: %s", out[strings.Index(out, "backfill:"):])
}

// TestCutoverKilled kills the relay with SIGKILL during the backfill: a
// restart with the same flags finishes it, and nothing is lost.
func TestCutoverKilled(t *testing.T) {
	o := newOutbox(t, "cutkill", workCoordinatorColumns)
	c := newCoordinator(o)
	cutoverStart(t, c)
	args := coordinatorArgs(o, "--backfill-where", "status <> 'Published'", "--max-in-flight", "10", "--batch-timeout", "20ms")
	killAfter(t, o, startRelayNoWait(t, args...), c.topic, 1000, 0)
	if _, err := c.write(context.Background(), 1000, 50, "Stored"); err != nil {
		t.Fatal(err)
	}
	startRelay(t, args...)
	msgs := consume(t, []string{c.topic}, 6000, 2*time.Minute)
	dups := c.checkCutover(t, msgs)
	t.Logf("kill -9 during the backfill, then a restart: nothing lost, %d duplicates", dups)
}

// TestCutoverBadConfiguration: each mistake is one line, the right exit
// code, and nothing streamed, marked or deleted.
func TestCutoverBadConfiguration(t *testing.T) {
	o := newOutbox(t, "cutbad", workCoordinatorColumns)
	c := newCoordinator(o)
	if _, err := c.write(context.Background(), 20, 5, "Stored"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a mark column that does not exist", []string{"--mark", "shipped_at=now()"}, 1, `has no column "shipped_at"`},
		{"a value of the wrong type", []string{"--mark", "attempts='many'"}, 1, `column "attempts" is integer, which 'many' does not fit`},
		{"a predicate that does not parse", []string{"--backfill-where", "status <> "}, 1, "--backfill-where"},
		{"a mark without a value", []string{"--mark", "status"}, 2, `"status": want COLUMN=VALUE`},
	} {
		code, out := runOnce(t, coordinatorArgs(o, tc.args...)...)
		if code != tc.code || !strings.Contains(lastLine(out), tc.want) {
			t.Errorf("%s: exit %d, last line %q; want exit %d and %q", tc.name, code, lastLine(out), tc.code, tc.want)
		}
	}
	// check names each item: the mark columns against their types, the
	// predicate, the privileges.
	check := func(extra ...string) string {
		args := append([]string{"check"}, coordinatorArgs(o, extra...)...)
		_, out := runOnce(t, without(without(args, "--status-interval"), "--http-addr")...)
		return out
	}
	good := check("--backfill-where", "status <> 'Published'")
	for _, want := range []string{"[ok  ] cleanup:", "[ok  ] backfill of public." + o.name + ": WHERE status <> 'Published' plans"} {
		if !strings.Contains(good, want) {
			t.Errorf("check lacks %q:\n%s", want, good)
		}
	}
	bad := check("--backfill-where", "status <> ", "--mark", "attempts='many'")
	for _, want := range []string{"[FAIL] cleanup:", `'many' does not fit`, "[FAIL] backfill of public." + o.name} {
		if !strings.Contains(bad, want) {
			t.Errorf("check lacks %q:\n%s", want, bad)
		}
	}
	var slots, touched int
	_ = o.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&slots)
	_ = o.db.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s WHERE status <> 'Stored'`, o.name)).Scan(&touched)
	if slots != 0 || touched != 0 {
		t.Errorf("after the refusals: %d slots, %d rows marked; want none", slots, touched)
	}
}
