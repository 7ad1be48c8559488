package producer

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slowProduce makes the cluster take d over each produce request. It
// sleeps in the cluster's own loop, one request after the other, rather
// than through SleepControl: kfake's queue of slept requests races with
// itself when requests pipelined on one connection sleep at once
// (bsleep.waitQueue, found by -race in TestPipelinedBacklog).
func slowProduce(cluster *kfake.Cluster, d time.Duration) {
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		time.Sleep(d)
		return nil, nil, false
	})
}

// TestPipelinedBacklog: a backlog to a slow broker goes in up to
// MaxInFlightRequests requests at once on the broker's connection, and
// every event is acknowledged once, in order per key, and written once,
// in order per key; with 1, one request at a time. The faults that send
// pipelined batches again are in TestIdempotenceUnderRandomFaults and
// TestTransactionUnderRandomFaults.
func TestPipelinedBacklog(t *testing.T) {
	for _, depth := range []int{1, 5} {
		t.Run(fmt.Sprint("depth=", depth), func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "pipe"))
			slowProduce(cluster, 5*time.Millisecond)
			const events, keys = 2000, 10
			ctx, w, f := keyedWriter(t, cluster, "pipe", events, testConfig{BatchSize: 10, MaxInFlightRequests: depth})
			publishKeyed(ctx, t, w, events, keys)
			total, distinct, _ := checkKeyed(ctx, t, f, w, keys, cluster, "pipe", 2)
			if total != events || distinct != events {
				t.Errorf("%d records of %d distinct events, want %d once each", total, distinct, events)
			}
			peak := w.peakInFlight()
			if depth == 1 && peak != 1 || depth > 1 && peak < 2 {
				t.Errorf("at most %d requests out at once, want %d", peak, depth)
			}
			t.Logf("depth %d: at most %d requests out at once", depth, peak)
		})
	}
}
