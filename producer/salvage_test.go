package producer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSalvageUnderRandomFaults: a salvage under random transient faults,
// with its partition's later events pipelined behind it and its dead
// letters going through the dead-letter topic's own queue: one fate per
// event, Done in order, the log in order without duplicates, one dead
// letter per event too large, and a single producer id.
func TestSalvageUnderRandomFaults(t *testing.T) {
	besideOthersWhenShort(t)
	cluster, coin, ids := salvageCluster(t, 1)
	injectRandomFaults(cluster, coin, "small",
		randomFault{kerr.RequestTimedOut, 0.08},
		randomFault{kerr.NotEnoughReplicas, 0.05})
	injectRandomFaults(cluster, coin, "dlq",
		randomFault{kerr.RequestTimedOut, 0.08},
		randomFault{kerr.NotEnoughReplicas, 0.05})
	o := newOutcomes()
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "small", BatchSize: 4, BatchTimeout: time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq",
		RetryBackoffMin: 2 * time.Millisecond, RetryBackoffMax: 20 * time.Millisecond}, o.done)
	ctx := testContext(t, 60*time.Second)
	events := sized(300, 150)
	large := 0
	for i := range events {
		payload := fmt.Appendf(nil, `{"n": %d}`, i)
		if i%11 == 5 {
			payload = make([]byte, 3000)
			large++
		}
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: payload}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	o.wait(ctx, t, events)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	for i := range uint64(events) {
		f := o.fates[i]
		wantReason := ""
		if i%11 == 5 {
			wantReason = ReasonMessageTooLarge
		}
		if f.times != 1 || f.err != nil || f.reason != wantReason {
			t.Errorf("event %d: %d fates, err %v, reason %q (want 1, nil, %q)", i, f.times, f.err, f.reason, wantReason)
		}
	}
	for i := 1; i < len(o.order); i++ {
		if o.order[i] <= o.order[i-1] {
			t.Errorf("Done out of order within the partition: %d after %d", o.order[i], o.order[i-1])
		}
	}
	o.mu.Unlock()
	got := readPartition(ctx, t, cluster.ListenAddrs(), "small", 0)
	want := 0
	for _, m := range got {
		for want%11 == 5 {
			want++
		}
		if id, _ := headerOf(m.Headers, "id"); id != fmt.Sprint(want) {
			t.Errorf("record is event %s, want %d", id, want)
		}
		want++
	}
	if len(got) != events-large {
		t.Errorf("%d records in small, want %d", len(got), events-large)
	}
	if dl := readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0); len(dl) != large {
		t.Errorf("%d dead letters, want %d", len(dl), large)
	}
	if n := ids.inits.Load(); n != 1 {
		t.Errorf("%d InitProducerID (want 1: a renewal means a sequence refused)", n)
	}
}

// TestSalvageUnderLeaderMovesAndFaults: salvages on three partitions
// whose leaders move between three brokers, beside random transient
// faults; each key's order in Done and in the log, every event once.
func TestSalvageUnderLeaderMovesAndFaults(t *testing.T) {
	besideOthersWhenShort(t)
	cluster, coin, ids := salvageCluster(t, 3)
	faults := injectRandomFaults(cluster, coin, "small",
		randomFault{kerr.RequestTimedOut, 0.05},
		randomFault{kerr.NotLeaderForPartition, 0.04},
		randomFault{kerr.NotEnoughReplicas, 0.03})
	injectRandomFaults(cluster, coin, "dlq",
		randomFault{kerr.RequestTimedOut, 0.08},
		randomFault{kerr.NotLeaderForPartition, 0.04})
	o := newOutcomes()
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "small", BatchSize: 4, BatchTimeout: time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq", MetadataMaxAge: 100 * time.Millisecond,
		RetryBackoffMin: 2 * time.Millisecond, RetryBackoffMax: 20 * time.Millisecond}, o.done)
	ctx := testContext(t, 90*time.Second)
	stopSmall := moveLeaders(cluster, coin, "small", 3, 20*time.Millisecond)
	stopDLQ := moveLeaders(cluster, coin, "dlq", 3, 30*time.Millisecond)
	events, keys := sized(600, 300), 6
	isLarge := func(i int) bool { return i%13 == 5 }
	large := 0
	for i := range events {
		payload := fmt.Appendf(nil, `{"n": %d}`, i)
		if isLarge(i) {
			payload = make([]byte, 3000)
			large++
		}
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprint("k", i%keys), EventType: "e", Payload: payload}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	o.wait(ctx, t, events)
	stopSmall()
	stopDLQ()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	for i := range events {
		f := o.fates[uint64(i)]
		wantReason := ""
		if isLarge(i) {
			wantReason = ReasonMessageTooLarge
		}
		if f.times != 1 || f.err != nil || f.reason != wantReason {
			t.Errorf("event %d: %d fates, err %v, reason %q (want 1, nil, %q)", i, f.times, f.err, f.reason, wantReason)
		}
	}
	last := map[int]int{}
	for _, tok := range o.order {
		k := int(tok) % keys
		if prev, ok := last[k]; ok && int(tok) <= prev {
			t.Errorf("Done out of key order: key %d: %d after %d", k, tok, prev)
		}
		last[k] = int(tok)
	}
	o.mu.Unlock()
	total := 0
	seen := map[string]bool{}
	for p := range 3 {
		lastID := map[string]int{}
		for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "small", p) {
			id, _ := headerOf(m.Headers, "id")
			var n int
			fmt.Sscan(id, &n)
			if seen[id] {
				t.Errorf("event %s twice in the log", id)
			}
			seen[id] = true
			if prev, ok := lastID[string(m.Key)]; ok && n <= prev {
				t.Errorf("partition %d key %s: event %d after %d", p, m.Key, n, prev)
			}
			lastID[string(m.Key)] = n
			total++
		}
	}
	if total != events-large {
		t.Errorf("%d records in small, want %d", total, events-large)
	}
	if dl := readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0); len(dl) != large {
		t.Errorf("%d dead letters, want %d", len(dl), large)
	}
	t.Logf("%d faults, %d InitProducerID", faults.Hits(), ids.inits.Load())
}

// TestSalvageKeepsSequences: a batch refused for one too large event is
// sent message by message, and the refused one dead-lettered. The
// messages sent alone carry the partition's sequence and a refused one
// does not advance it: the broker never refuses a sequence (which would
// make the writer ask for a second producer id). Dead letters go through
// the dead-letter topic's own queue, under its partition's sequence.
func TestSalvageKeepsSequences(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1))
	ids := watchProducerIDs(t, cluster)
	ctx, w, o := smallTopicWriter(t, cluster, "dlq")
	const events = 30
	for i := range events {
		payload := fmt.Appendf(nil, `{"n": %d}`, i)
		if i%10 == 5 {
			payload = make([]byte, 3000)
		}
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: payload}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%10 == 9 {
			o.wait(ctx, t, i+1) // three batches, each salvaged
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := readPartition(ctx, t, cluster.ListenAddrs(), "small", 0)
	for i, m := range got {
		if id, _ := headerOf(m.Headers, "id"); id != fmt.Sprint(i+i/9+boolInt(i%9 >= 5)) {
			t.Errorf("record %d is event %s", i, id)
		}
	}
	if len(got) != events-3 || ids.inits.Load() != 1 || !ids.idempotent("small") {
		t.Errorf("%d records (want %d), %d InitProducerID (want 1), batches by producer id %v", len(got), events-3, ids.inits.Load(), ids.batches)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCloseDuringASalvageRetriedForEver: a salvage's message meets
// transient failures until Close gives up: Close returns soon after its
// context, and every event has one fate.
func TestCloseDuringASalvageRetriedForEver(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1))
	if err := cluster.CreateTopic("small", 1, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("dlq", 1, nil); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "small", Err: kerr.NotEnoughReplicas, Count: -1,
		When: func(kmsg.Request) bool { return calls.Add(1) > 1 }})
	o := newOutcomes()
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "small", BatchSize: 100, BatchTimeout: 20 * time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq",
		RetryBackoffMin: 2 * time.Millisecond, RetryBackoffMax: 20 * time.Millisecond}, o.done)
	ctx := testContext(t, 30*time.Second)
	const events = 20
	for i := range events {
		payload := fmt.Appendf(nil, `{"n": %d}`, i)
		if i == 0 {
			payload = make([]byte, 3000)
		}
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: payload}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the salvage's message retried meanwhile
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Close(cctx)
	took := time.Since(start)
	t.Logf("Close: %v after %s; %d produce calls to small", err, took, calls.Load())
	if took > 2*time.Second {
		t.Errorf("Close took %s", took)
	}
	o.wait(ctx, t, events)
	time.Sleep(50 * time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range uint64(events) {
		if f := o.fates[i]; f.times != 1 || f.err == nil {
			t.Errorf("event %d: %d fates, err %v (want 1, failed)", i, f.times, f.err)
		}
	}
}

// salvageCluster starts a cluster of n brokers holding "small" (n
// partitions, records over 2,000 bytes refused) and "dlq", watching the
// producer ids it hands out; its coin is seeded from the clock (logged).
func salvageCluster(t *testing.T, n int) (*kfake.Cluster, *chance, *producerIDs) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	coin := &chance{rng: rand.New(rand.NewPCG(seed, seed>>1))}
	cluster := newFakeCluster(t, kfake.NumBrokers(n))
	ids := watchProducerIDs(t, cluster)
	if err := cluster.CreateTopic("small", int32(n), map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("dlq", 1, nil); err != nil {
		t.Fatal(err)
	}
	return cluster, coin, ids
}

// smallTopicWriter creates "small", whose max.message.bytes (2000) is below
// the writer's own limit, so that the broker refuses a larger event, and
// "dlq"; it starts a writer to "small" with dead-letter topic dlq ("" for
// none). The cluster is the caller's, to watch before the writer starts.
func smallTopicWriter(t *testing.T, cluster *kfake.Cluster, dlq string) (context.Context, *testWriter, *outcomes) {
	t.Helper()
	if err := cluster.CreateTopic("small", 1, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("dlq", 1, nil); err != nil {
		t.Fatal(err)
	}
	o := newOutcomes()
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "small", BatchSize: 100, BatchTimeout: 20 * time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: dlq}, o.done)
	return testContext(t, 30*time.Second), w, o
}
