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
	slowFault(t)
	o := newOutbox(t, "cutkill", workCoordinatorColumns)
	c := newCoordinator(o)
	cutoverStart(t, c)
	explainUnmarked(t, o)
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

// TestCutoverKilledUnderWrites is the cutover as a team tries it: 20,000
// rows pending, the application writing throughout, a kill -9 during
// the backfill (once it recorded progress) and a restart with the same
// flags. Every row arrives, and
// every row ends marked: a row acknowledged before the kill whose mark had
// not run must not be left unmarked (a team that rolls back to its poller
// would send it again).
func TestCutoverKilledUnderWrites(t *testing.T) {
	o := newOutbox(t, "cutwrites", workCoordinatorColumns)
	c := newCoordinator(o)
	ctx := context.Background()
	if _, err := c.write(ctx, 20000, 50, "Stored"); err != nil {
		t.Fatal(err)
	}
	explainUnmarked(t, o)
	args := coordinatorArgs(o, "--backfill-where", "status <> 'Published'")
	stop := make(chan struct{})
	var writing sync.WaitGroup
	writing.Go(func() { // the application, until stop
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := c.write(ctx, 10, 50, "Stored"); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { close(stop); writing.Wait() }()
	// Killed while the backfill runs, soon after it first recorded
	// progress: rows acknowledged and marked, and rows acknowledged whose
	// marks are under way.
	killDuringBackfill(t, o, startRelayNoWait(t, args...))
	startRelay(t, args...)
	time.Sleep(2 * time.Second)
	close(stop)
	writing.Wait()
	stop = make(chan struct{}) // for the deferred close
	c.mu.Lock()
	n := len(c.ids)
	c.mu.Unlock()
	msgs := consume(t, []string{c.topic}, n, 2*time.Minute)
	dups := c.checkCutover(t, msgs)
	t.Logf("%d rows, kill -9 during the backfill under writes: %d duplicates", n, dups)
}

// TestBackfillResumeAfterRowsTouched: the rows of one transaction are read
// in the order of their statements (cmin), which any UPDATE of a row
// rewrites. An application that updates its outbox rows between a kill -9
// and the restart (a retry counter, as pollers keep) must not make the
// resume skip the rest of the transaction its recorded progress ended in:
// every row arrives, and every row ends marked.
func TestBackfillResumeAfterRowsTouched(t *testing.T) {
	o := newOutbox(t, "bftouch", workCoordinatorColumns)
	c := newCoordinator(o)
	ctx := context.Background()
	if _, err := c.write(ctx, 3000, 50, "Stored"); err != nil {
		t.Fatal(err)
	}
	explainUnmarked(t, o)
	args := coordinatorArgs(o, "--backfill-where", "status <> 'Published'", "--max-in-flight", "10", "--batch-timeout", "20ms")
	killDuringBackfill(t, o, startRelayNoWait(t, args...))
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET attempts = attempts + 1`, o.name)); err != nil {
		t.Fatal(err)
	}
	startRelay(t, args...)
	msgs := consume(t, []string{c.topic}, 3000, 2*time.Minute)
	dups := c.checkCutover(t, msgs)
	t.Logf("every row updated between a kill -9 and the restart: nothing lost, %d duplicates", dups)
}
