package producer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRenewalRefusedForGood: the broker refuses the producer's sequence
// (it lost the producer's state) and then refuses producer ids for good
// (ClusterAuthorizationFailed). A broker that gives no producer id leaves
// the writer sending without idempotence, with a warning; the events must
// still be delivered (at least once). Found by review: the refused batch
// kept the old producer id and sequence, and was refused for ever.
func TestRenewalRefusedForGood(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "ren"))
	var produced, inits, refused atomic.Int32
	withPID := func(req kmsg.Request) bool { id, ok := batchPID(req, 0); return ok && id >= 0 } // "ren" has one partition
	cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "ren", Err: kerr.OutOfOrderSequenceNumber, Count: -1,
			When: func(req kmsg.Request) bool {
				if produced.Add(1) <= 3 || !withPID(req) {
					return false
				}
				refused.Add(1)
				return true
			}},
		kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.ClusterAuthorizationFailed, Count: -1,
			When: func(kmsg.Request) bool { return inits.Add(1) > 1 }},
	)
	const events = 60
	_, w, f := keyedWriter(t, cluster, "ren", events, testConfig{BatchSize: 10})
	ctx := testContext(t, 20*time.Second)
	for i := range events {
		if err := w.Publish(ctx, keyedEvent(i, 1), uint64(i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case <-f.all:
	case <-ctx.Done():
		f.mu.Lock()
		n := len(f.acked)
		f.mu.Unlock()
		t.Errorf("%d of %d events acknowledged after 20 s; %d produce requests, %d refused for their producer id, %d InitProducerID",
			n, events, produced.Load(), refused.Load(), inits.Load())
		closeCtx := testContext(t, time.Second)
		_ = w.Close(closeCtx)
		return
	}
	_ = w.Close(ctx)
}
