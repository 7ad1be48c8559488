package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSyncFailureBesidePipelined: a partition has two batches out on a
// connection that breaks (B0 alone, B1 joined); a third (B2) was chosen to
// join it, and its send finds the connection broken and cannot dial. B2
// is settled at once, ahead of B1 whose failure comes later: retries
// become [B0, B2, B1]; B2 goes alone before B1, is refused for its
// sequence, renews the producer id and is written before B1.
func TestSyncFailureBesidePipelined(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "mis"))
	var produced atomic.Int32
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		n := produced.Add(1)
		if n != 2 && n != 3 {
			return nil, nil, false
		}
		cluster.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		preq := req.(*kmsg.ProduceRequest)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = preq.Version
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	const events = 40
	gate := make(chan struct{})
	var holds atomic.Int32
	var brk *dialBreaker
	hold := func(ctx context.Context) {
		switch holds.Add(1) {
		case 1:
			<-gate
		case 4: // B2's send: its connection breaks, and the broker cannot be dialed once
			brk.breakConnection(0)
		}
	}
	ctx, w, f := keyedWriter(t, cluster, "mis", events, testConfig{BatchSize: 10, MaxInFlightRequests: 5, Hold: hold})
	brk = w.dialBreaker() // before the first event: no sender runs yet
	publishKeyed(ctx, t, w, 1, 1)
	for i := 1; i < events; i++ {
		if err := w.Publish(ctx, keyedEvent(i, 1), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	total, distinct, _ := checkKeyed(ctx, t, f, w, 1, cluster, "mis", 1)
	t.Logf("%d records, %d distinct, %d produce requests at the broker, %d sends", total, distinct, produced.Load(), holds.Load())
}
