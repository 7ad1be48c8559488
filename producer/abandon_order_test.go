package producer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAbandonReportsInOrder: B1 is written but answered RequestTimedOut and
// its retries keep failing; B2, beside it, is acknowledged and held for
// B1's fate. Close gives up: B1's events fail, B2's are acknowledged, and
// Done must see them in the partition's order (B1's first).
func TestAbandonReportsInOrder(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "ord"))
	var n atomic.Int32
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "ord", Err: kerr.RequestTimedOut, Count: -1,
			When: func(kmsg.Request) bool { return n.Load() == 2 }},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "ord", Err: kerr.NotEnoughReplicas, Count: -1,
			When: func(kmsg.Request) bool { return n.Load() >= 4 }},
	)
	var mu sync.Mutex
	var seen []uint64
	var failed = map[uint64]bool{}
	gate := make(chan struct{})
	var holds atomic.Int32
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "ord", BatchSize: 10, BatchTimeout: 2 * time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, Hold: func(context.Context) {
			if holds.Add(1) == 1 {
				<-gate
			}
		}}, func(token uint64, _ string, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, token)
		failed[token] = err != nil
	})
	ctx := testContext(t, 30*time.Second)
	for i := range 31 {
		if err := w.Publish(ctx, keyedEvent(i, 1), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	time.Sleep(500 * time.Millisecond)
	closeCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_ = w.Close(closeCtx)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("fates in order: %v (failed: %v)", seen, failed)
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Errorf("event %d's fate (failed %t) reported after event %d's (failed %t)", seen[i], failed[seen[i]], seen[i-1], failed[seen[i-1]])
			break
		}
	}
}
