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

// TestRoundTripWithoutRenewal: receive settles the requests out one after
// the other; while it renews the producer id for one request's refused
// batch (an InitProducerID round trip, here 1.5 s), the answers of the
// requests pipelined behind it arrive and wait. Their round trip is when
// each answer came in, not when receive got to it: else the sender's rtt
// holds the renewal, and sender.dueAt holds a trickle beside a backlog
// that much longer. Found by review (1.52 s recorded against a broker
// answering in 20 ms).
func TestRoundTripWithoutRenewal(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "rtt"))
	slowProduce(cluster, 20*time.Millisecond)
	var inits atomic.Int32
	const renewal = 1500 * time.Millisecond
	cluster.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if inits.Add(1) > 1 {
			cluster.SleepControl(func() { time.Sleep(renewal) })
		}
		return nil, nil, false
	})
	token := uint64(0)
	const phase1, backlog = 20, 400
	ctx, w, f := keyedWriter(t, cluster, "rtt", 2*phase1+1+backlog, testConfig{BatchSize: 10})
	publish := func(part int) {
		token++
		ev := &event{ID: fmt.Sprint(token), AggregateType: "t", AggregateID: fmt.Sprint("k", part), EventType: "e",
			Payload: binary.BigEndian.AppendUint64(nil, token), Partition: fmt.Sprint(part)}
		if err := w.Publish(ctx, ev, token); err != nil {
			t.Fatal(err)
		}
	}
	for range phase1 {
		publish(0)
		publish(1)
	}
	waitAcked(ctx, t, f, 2*phase1)

	// Partition 1's lone batch is refused for its sequence: the writer
	// renews its producer id (1.5 s) while partition 0's backlog has
	// requests out behind it.
	faults := cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "rtt", Partitions: []int32{1}, Err: kerr.OutOfOrderSequenceNumber, Count: 1,
		When: func(req kmsg.Request) bool { id, ok := batchPID(req, 1); return ok && id >= 0 }})
	publish(1)
	for range backlog {
		publish(0)
	}
	f.wait(ctx, t, w)
	if faults.Hits() == 0 || inits.Load() < 2 {
		t.Fatalf("no renewal (%d refusals, %d InitProducerID): the test proves nothing", faults.Hits(), inits.Load())
	}
	got := w.slowestRoundTrip()
	t.Logf("renewal %s; longest round trip the sender recorded: %s; at most %d requests out at once", renewal, got, w.peakInFlight())
	if got > renewal/2 {
		t.Errorf("the sender recorded a round trip of %s against a broker answering in ~20 ms: the renewal while settling an earlier request counted in it", got)
	}
}
