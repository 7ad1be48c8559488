package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestExactlyOnceLargeTransaction writes one Postgres transaction of a
// million rows (OUTBOX_CDC_TEST_LARGE_ROWS to change it), a hundred times
// the relay's in-flight window. Exactly-once keeps it in one Kafka
// transaction: while it streams, a read_committed consumer's offsets (the
// last stable offsets) stay where they were, then move past all of it at
// once. The relay is killed (SIGKILL) once part of it is written and
// unacknowledged in Kafka: the restarted relay's InitProducerID aborts
// that transaction, and read_committed consumers never see its records;
// the transaction is published again, whole. At the end every row is read
// once, in order per aggregate.
func TestExactlyOnceLargeTransaction(t *testing.T) {
	slowFault(t)
	rows := 1_000_000
	if s := os.Getenv("OUTBOX_CDC_TEST_LARGE_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	o := newOutbox(t, "eoslarge", defaultColumns)
	args := exactlyArgs(o, "--max-in-flight", "10000")
	r := startRelay(t, args...)
	topic := o.name + ".order"
	ctx := context.Background()
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'order', 'first', 'Placed', '{"n": 0}')`, o.name)); err != nil {
		t.Fatal(err)
	}
	consumeCommitted(t, []string{topic}, 1, time.Minute)
	stable0, _ := offsetSums(t, topic)

	began := time.Now()
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'order', (g %% 100)::text, 'Placed', jsonb_build_object('n', g)
		FROM generate_series(1, %d) g`, o.name, rows)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows committed in one transaction in %s", rows, time.Since(began).Round(time.Millisecond))

	// Killed once a tenth of it is in Kafka, unacknowledged to Postgres.
	killAt := int64(rows) / 10
	before := watchStable(t, topic, stable0, killAt, time.Minute)
	if before.moved != 0 || before.unstable < killAt {
		t.Fatalf("before the kill: %+v, want %d records written and none readable", before, killAt)
	}
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	startRelay(t, args...)
	// The new instance's InitProducerID aborts the killed one's
	// transaction: the stable offset moves past its records, which
	// read_committed consumers skip.
	aborted := watchStable(t, topic, stable0, math.MaxInt64, time.Minute)
	time.Sleep(time.Second) // every partition's abort marker written
	stable1, _ := offsetSums(t, topic)
	after := watchStable(t, topic, stable1, math.MaxInt64, 3*time.Minute)
	time.Sleep(time.Second) // every partition's commit marker written
	stable2, high2 := offsetSums(t, topic)
	t.Logf("before the kill: %d records written, none readable; aborted by the restart: %d; republished: %d written before any was readable, "+
		"then all readable (stable offsets moved by %d of %d records)", before.unstable, aborted.moved, after.highAtMove, stable2-stable1, high2-stable1)
	if after.highAtMove < int64(rows) {
		t.Errorf("read_committed consumers could read the transaction when %d of its %d records were written", after.highAtMove, rows)
	}
	if stable2 != high2 {
		t.Errorf("after the commit, %d records remain unreadable", high2-stable2)
	}
	checkLargeTransaction(t, topic, rows)
}

// offsetSums returns the sums over topic's partitions of the last stable
// offsets (what read_committed consumers may read below) and of the high
// watermarks.
func offsetSums(t *testing.T, topic string) (stable, high int64) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A topic just created can be in the broker's answer without its
	// partitions for a moment, even once a consumer read from it: the sums
	// would leave them out (and a later one seem to move).
	var md *kafka.MetadataResponse
	for {
		var err error
		md, err = client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil && len(md.Topics[0].Partitions) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("metadata of %s: %v (last answer: %+v)", topic, err, md)
		case <-time.After(50 * time.Millisecond):
		}
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	for _, level := range []kafka.IsolationLevel{kafka.ReadCommitted, kafka.ReadUncommitted} {
		res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}, IsolationLevel: level})
		if err != nil {
			t.Fatalf("list offsets of %s: %v", topic, err)
		}
		var sum int64
		for _, p := range res.Topics[topic] {
			if p.Error != nil {
				t.Fatalf("list offsets of %s/%d: %v", topic, p.Partition, p.Error)
			}
			sum += p.LastOffset
		}
		if level == kafka.ReadCommitted {
			stable = sum
		} else {
			high = sum
		}
	}
	return stable, high
}

// stableWatch is what watchStable saw.
type stableWatch struct {
	unstable   int64 // the most records written above the stable offset while it stayed
	moved      int64 // how far the stable offset moved (0: it did not)
	highAtMove int64 // records written above the start when it moved
}

// watchStable samples topic's offset sums every 50 ms until the records
// above stable0 that read_committed consumers cannot read reach until,
// the stable offset moves, or timeout passes.
func watchStable(t *testing.T, topic string, stable0, until int64, timeout time.Duration) stableWatch {
	t.Helper()
	var w stableWatch
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		stable, high := offsetSums(t, topic)
		if stable != stable0 {
			w.moved, w.highAtMove = stable-stable0, high-stable0
			return w
		}
		if w.unstable = max(w.unstable, high-stable0); w.unstable >= until {
			return w
		}
	}
	return w
}

// checkLargeTransaction reads topic at read_committed: each of the rows
// (and the first event) once, each aggregate's in order of n.
func checkLargeTransaction(t *testing.T, topic string, rows int) {
	t.Helper()
	msgs := consumeCommitted(t, []string{topic}, rows+1, 3*time.Minute)
	seen := make(map[string]bool, len(msgs))
	last := map[string]int{}
	dups, disorder := 0, 0
	for _, m := range msgs {
		id, _ := testkit.Header(m, "id")
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		var p struct{ N int }
		if err := json.Unmarshal(m.Value, &p); err != nil {
			t.Fatalf("payload %q: %v", m.Value, err)
		}
		if n, ok := last[string(m.Key)]; ok && p.N <= n {
			disorder++
		}
		last[string(m.Key)] = p.N
	}
	if len(seen) != rows+1 || dups != 0 || disorder != 0 {
		t.Errorf("read %d distinct events (want %d), %d duplicates, %d out of order", len(seen), rows+1, dups, disorder)
	}
}

// TestExactlyOnceSlowInterval streams one Postgres transaction 40 times the
// in-flight window with Kafka transactions of 2 s. Produce requests held
// back for the commit (exactly-once paces them to the interval) would move
// one window per interval, 80 s, past the 30 s transaction timeout, and the
// broker would abort and fence every attempt for ever; once a commit's
// tick finds the Postgres transaction spanning it, they leave at once, and
// it commits as one, fenced never.
func TestExactlyOnceSlowInterval(t *testing.T) {
	slowFault(t)
	const rows = 20000
	o := newOutbox(t, "eosslow", defaultColumns)
	r := startRelay(t, exactlyArgs(o, "--max-in-flight", "500", "--transaction-interval", "2s", "--transaction-timeout", "30s")...)
	began := time.Now()
	if _, err := o.db.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'order', (g %% 100)::text, 'Placed', jsonb_build_object('n', g)
		FROM generate_series(1, %d) g`, o.name, rows)); err != nil {
		t.Fatal(err)
	}
	msgs := consumeCommitted(t, []string{o.name + ".order"}, rows, 2*time.Minute)
	if len(msgs) != rows {
		t.Fatalf("read %d records at read_committed, want the %d rows of the transaction", len(msgs), rows)
	}
	if n := r.countLines("fenced"); n != 0 {
		t.Errorf("the relay was fenced %d times (its transaction outlived the timeout):\n%s", n, testkit.Tail(r.LogText(), 10))
	}
	t.Logf("%d rows in one transaction, window 500, interval 2s: readable after %s", rows, time.Since(began).Round(time.Millisecond))
}
