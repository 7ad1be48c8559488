package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestCloseAfterALeaderMovedDuringTheDrain: a partition's leader moves
// while Close drains it, so its event is refused by the old leader and
// acknowledged by the new one. The old leader's sender, which carries
// nothing any more, must stop then: Close returns soon after the
// acknowledgement, not at the end of its context.
func TestCloseAfterALeaderMovedDuringTheDrain(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "events"))
	o := newOutcomes()
	var ackedAt atomic.Int64
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "events", BatchTimeout: time.Millisecond, MetadataMaxAge: 300 * time.Millisecond,
		RetryBackoffMin: 5 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond}, func(token uint64, reason string, err error) {
		if token == 1 {
			ackedAt.Store(time.Now().UnixNano())
		}
		o.done(token, reason, err)
	})
	ctx := testContext(t, 30*time.Second)
	ev := &event{ID: "x", AggregateType: "t", AggregateID: "k", EventType: "e", Payload: []byte(`{}`)}
	if err := w.Publish(ctx, ev, 0); err != nil {
		t.Fatal(err)
	}
	o.wait(ctx, t, 1)
	leader := cluster.PartitionInfos("events")[0].Leader
	if err := cluster.MoveTopicPartition("events", 0, 1-leader); err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(ctx, ev, 1); err != nil { // routed to the old leader, which refuses it
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err := w.Close(cctx)
	took := time.Since(start)
	f, ok := o.get(1)
	if !ok || f.err != nil {
		t.Fatalf("event 1: reported %v, fate %v; want acknowledged (Close: %v after %s)", ok, f.err, err, took)
	}
	acked := time.Duration(ackedAt.Load() - start.UnixNano())
	if err != nil || took > acked+2*time.Second {
		t.Errorf("Close returned %v after %s, though event 1 was acknowledged %s after it began", err, took, acked)
	}
}
