package producer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNewBatchesBesideSecondRetry: B1..B5 go out at once; B1 and B2 are
// written but answered RequestTimedOut. B1's retry (alone) is acknowledged,
// which resets attempt though B2 still waits to be retried; B2's retry then
// goes out with B6..B9 beside it. Its answer is lost again, and by its next
// retry 7 batches were written after it: the broker no longer recognises
// it (out of order), the writer renews its producer id and B2 is written
// twice.
func TestNewBatchesBesideSecondRetry(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "win"))
	var n atomic.Int32
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	faults := cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "win", Err: kerr.RequestTimedOut, Count: -1,
			When: func(kmsg.Request) bool { c := n.Load(); return c == 2 || c == 3 }},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "win", Err: kerr.NotEnoughReplicasAfterAppend, Count: -1,
			When: func(kmsg.Request) bool { return n.Load() == 8 }},
	)
	const events = 91
	gate := make(chan struct{})
	var holds atomic.Int32
	hold := func(context.Context) { // the first request waits, so that B1..B5 go out at once
		if holds.Add(1) == 1 {
			<-gate
		}
	}
	ctx, w, f := keyedWriter(t, cluster, "win", events, testConfig{BatchSize: 10, MaxInFlightRequests: 5, Hold: hold})
	publishKeyed(ctx, t, w, 1, 1)
	for i := 1; i < events; i++ {
		if err := w.Publish(ctx, keyedEvent(i, 1), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	total, distinct, _ := checkKeyed(ctx, t, f, w, 1, cluster, "win", 1)
	if total != distinct {
		t.Errorf("%d records of %d distinct events: %d written twice", total, distinct, total-distinct)
	}
	t.Logf("%d records, %d distinct, %d produce requests, %d faults", total, distinct, n.Load(), faults.Hits())
}
