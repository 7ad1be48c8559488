package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRetriableProduceErrorsKeepOrder runs the writer against franz-go's
// in-process fake broker, which fails every third produce request with
// NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT. Every event must be
// acknowledged once, and reading each partition in offset order, each key's
// events must first appear in the order they were published.
func TestRetriableProduceErrorsKeepOrder(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "events"))
	var requests, injected atomic.Int64
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		n := requests.Add(1)
		if n%3 != 0 {
			return nil, nil, false
		}
		code := int16(6) // NOT_LEADER_OR_FOLLOWER
		if n%2 == 0 {
			code = 7 // REQUEST_TIMED_OUT
		}
		injected.Add(1)
		preq := req.(*kmsg.ProduceRequest)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	events, keys := sized(3000, 600), 30
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "events", BatchSize: 20, BatchTimeout: 2 * time.Millisecond,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 20 * time.Millisecond, AutoCreateTopics: true, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range events {
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprintf("k%d", i%keys), EventType: "e",
			Payload: binary.BigEndian.AppendUint32(nil, uint32(i/keys))}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	f.wait(ctx, t, w)
	if injected.Load() == 0 {
		t.Fatal("no produce error was injected: the test proves nothing")
	}

	// Read back: per key, first deliveries count 0, 1, 2, ...
	next := map[string]uint32{}
	seen := map[string]bool{}
	total := 0
	for p := range 3 {
		for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "events", p) {
			total++
			id := string(m.Headers[0].Value)
			if seen[id] {
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
	t.Logf("%d produce requests, %d failed by injection; %d events acknowledged once each, %d records in the topic (%d duplicates), order kept per key",
		requests.Load(), injected.Load(), events, total, total-len(seen))
}
