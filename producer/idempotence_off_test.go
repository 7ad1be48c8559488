package producer

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchPID returns the producer id of partition part's batch in a produce
// request, and whether the request carries one for it.
func batchPID(req kmsg.Request, part int32) (int64, bool) {
	for _, rt := range req.(*kmsg.ProduceRequest).Topics {
		for _, rp := range rt.Partitions {
			if rp.Partition != part {
				continue
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(rp.Records); err != nil {
				return 0, false
			}
			return b.ProducerID, true
		}
	}
	return 0, false
}

// TestIdempotenceOffStopsPipelining: the broker gave a producer id, then
// refuses partition 0's sequence and every later InitProducerID, so the
// writer goes on without idempotence. Partition 1 keeps its sequence (only
// the refused partition's is cleared), and its batches, now without a
// producer id, must no longer go several at once: the broker cannot refuse
// a batch whose predecessor failed, so the first failing with a retriable
// error (NOT_ENOUGH_REPLICAS) while the next is written reorders the key.
// Found by review: event 12 written after event 21.
func TestIdempotenceOffStopsPipelining(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "mix"))
	slowProduce(cluster, 10*time.Millisecond)
	ids := watchProducerIDs(t, cluster)
	const keys = 5
	seq := map[string]uint32{}
	token := uint64(0)
	total := 0
	mk := func(part, key int) *event {
		k := fmt.Sprintf("p%dk%d", part, key)
		n := seq[k]
		seq[k]++
		token++
		return &event{ID: fmt.Sprint(token), AggregateType: "t", AggregateID: k, EventType: "e",
			Payload: binary.BigEndian.AppendUint32(nil, n), Partition: fmt.Sprint(part)}
	}
	const phase1, phase3 = 60, 300
	ctx, w, f := keyedWriter(t, cluster, "mix", 2*phase1+1+phase3, testConfig{BatchSize: 10})
	publish := func(part, i int) {
		total++
		ev := mk(part, i%keys)
		if err := w.Publish(ctx, ev, token); err != nil {
			t.Fatal(err)
		}
	}
	// Phase 1: both partitions get a sequence under the first producer id.
	for i := range phase1 {
		publish(0, i)
		publish(1, i)
	}
	waitAcked(ctx, t, f, total)

	// Phase 2: partition 0's lone batch is refused for its sequence, and
	// the broker gives no producer id any more.
	cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.ClusterAuthorizationFailed, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "mix", Partitions: []int32{0}, Err: kerr.OutOfOrderSequenceNumber, Count: 1,
			When: func(req kmsg.Request) bool { id, ok := batchPID(req, 0); return ok && id >= 0 }},
	)
	publish(0, 0)
	waitAcked(ctx, t, f, total)
	if ids.without("mix") == 0 {
		t.Fatal("idempotence still on (every batch carried a producer id): the test proves nothing")
	}

	// Phase 3: partition 1's backlog; its first batch without producer id
	// fails once, retriably, before the broker writes it.
	var noPID atomic.Int32
	faults := cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "mix", Partitions: []int32{1}, Err: kerr.NotEnoughReplicas, Count: 1,
		When: func(req kmsg.Request) bool {
			id, ok := batchPID(req, 1)
			if ok && id < 0 {
				noPID.Add(1)
			}
			return ok && id < 0
		}})
	for i := range phase3 {
		publish(1, i)
	}
	f.wait(ctx, t, w)
	total2, distinct, _ := checkLog(ctx, t, cluster.ListenAddrs(), "mix", 2)
	if faults.Hits() == 0 {
		t.Fatal("no fault injected: the test proves nothing")
	}
	t.Logf("%d records, %d distinct; at most %d requests out at once", total2, distinct, w.peakInFlight())
}
