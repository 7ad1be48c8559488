package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOnePartitionFailsInAMultiPartitionRequest: requests carry several
// partitions, and the fake broker fails only partition 1 of them, with a
// retriable error, in two requests of every three. The other partitions'
// batches in those requests are written and acknowledged once; partition
// 1's batch is retried alone-in-its-partition, and each key's events still
// first appear in the order they were published.
func TestOnePartitionFailsInAMultiPartitionRequest(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(4, "events"))
	var requests, multi, withOne, injected atomic.Int64
	partitions := func(preq *kmsg.ProduceRequest) (n int, hasOne bool) {
		for _, rt := range preq.Topics {
			for _, rp := range rt.Partitions {
				n++
				hasOne = hasOne || rp.Partition == 1
			}
		}
		return n, hasOne
	}
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		requests.Add(1)
		if n, _ := partitions(req.(*kmsg.ProduceRequest)); n > 1 {
			multi.Add(1)
		}
		return nil, nil, false
	})
	// Partition 1 alone fails, in two of every three multi-partition
	// requests that carry it; the request's other partitions are written.
	cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: "events", Partitions: []int32{1},
		Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(req kmsg.Request) bool {
			n, hasOne := partitions(req.(*kmsg.ProduceRequest))
			if n < 2 || !hasOne || withOne.Add(1)%3 == 0 {
				return false
			}
			injected.Add(1)
			return true
		},
	})

	const events, keys = 4000, 40
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "events", BatchSize: 50, BatchTimeout: 3 * time.Millisecond,
		AutoCreateTopics: true, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range events {
		if err := w.Publish(ctx, keyedEvent(i, keys), uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%40 == 0 {
			time.Sleep(4 * time.Millisecond) // let many requests go
		}
	}
	f.wait(ctx, t, w)
	if injected.Load() < 2 || multi.Load() == 0 {
		t.Fatalf("%d multi-partition requests, %d with partition 1 failed: the test proves nothing", multi.Load(), injected.Load())
	}

	next := map[string]uint32{}
	seen := map[string]bool{}
	dups := map[int]int{}
	for p := range 4 {
		for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "events", p) {
			id := string(m.Headers[0].Value)
			if seen[id] {
				dups[p]++
				continue
			}
			seen[id] = true
			n := binary.BigEndian.Uint32(m.Value)
			if n != next[string(m.Key)] {
				t.Errorf("key %s: event %d first delivered when %d was next", m.Key, n, next[string(m.Key)])
			}
			next[string(m.Key)] = n + 1
		}
	}
	if len(seen) != events {
		t.Errorf("%d distinct events in the topic, want %d", len(seen), events)
	}
	for p, n := range dups {
		if p != 1 && n > 0 {
			t.Errorf("partition %d holds %d duplicates: a batch written once was sent again", p, n)
		}
	}
	t.Logf("%d produce requests, %d carrying several partitions, %d with partition 1 failed and the others written; every event acknowledged once, order kept per key",
		requests.Load(), multi.Load(), injected.Load())
}

// TestTrickleSharesRequests: events trickling into six partitions, one a
// millisecond, share produce requests: each request carries every partition
// with events waiting, and requests to the broker are at most one per
// BatchTimeout while events keep coming. (Counts, not timings, are
// asserted: a slower machine only makes batches larger.)
func TestTrickleSharesRequests(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var requests, multi atomic.Int64
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		requests.Add(1)
		n := 0
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			n += len(rt.Partitions)
		}
		if n > 1 {
			multi.Add(1)
		}
		return nil, nil, false
	})
	const events = 300
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "events", BatchSize: 1000, BatchTimeout: 10 * time.Millisecond,
		AutoCreateTopics: true, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range events {
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprintf("k%d", i), EventType: "e", Payload: []byte("{}")}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		time.Sleep(time.Millisecond)
	}
	f.wait(ctx, t, w)
	if requests.Load() > events/3 || multi.Load() == 0 {
		t.Errorf("%d produce requests for %d trickling events (%d with several partitions): requests are not shared", requests.Load(), events, multi.Load())
	}
	t.Logf("%d events one a millisecond over 6 partitions: %d produce requests, %d of them with several partitions", events, requests.Load(), multi.Load())
}
