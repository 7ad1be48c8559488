package producer

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestADeadLetteredEventIsReportedAfterItsPartitionsEarlierEvents: Done
// is called in order within a partition, a salvage's dead letter
// included. Event 0 is acknowledged on its partition's first leader,
// whose reporter is slow inside Done(0); the partition moves to the
// other broker meanwhile, where event 1 is refused as too large and
// dead-lettered (the dead-letter topic led there too). Done(1) must wait
// for Done(0) to return, though the dead letter's answer comes first.
func TestADeadLetteredEventIsReportedAfterItsPartitionsEarlierEvents(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(2))
	if err := cluster.CreateTopic("small", 1, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("dlq", 1, nil); err != nil {
		t.Fatal(err)
	}
	first := cluster.PartitionInfos("small")[0].Leader
	if cluster.PartitionInfos("dlq")[0].Leader == first {
		if err := cluster.MoveTopicPartition("dlq", 0, 1-first); err != nil {
			t.Fatal(err)
		}
	}
	topic := "small"
	o := newOutcomes()
	var mu sync.Mutex
	var inDone []uint64 // Done calls under way
	var overlaps []string
	entered, later := make(chan struct{}), make(chan struct{}, 1)
	done := func(token uint64, reason string, err error) {
		mu.Lock()
		for _, other := range inDone {
			overlaps = append(overlaps, fmt.Sprintf("Done(%d) while Done(%d) was under way", token, other))
		}
		inDone = append(inDone, token)
		mu.Unlock()
		if token == 0 {
			close(entered)
			select { // slow: as long as a later event's Done may come
			case <-later:
			case <-time.After(2 * time.Second):
			}
		} else {
			select {
			case later <- struct{}{}:
			default:
			}
		}
		o.done(token, reason, err)
		mu.Lock()
		inDone = slices.DeleteFunc(inDone, func(x uint64) bool { return x == token })
		mu.Unlock()
	}
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq"}, done)
	ctx := testContext(t, 30*time.Second)
	ev := func(i int, payload []byte) *event {
		return &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: payload}
	}
	if err := w.Publish(ctx, ev(0, []byte(`{}`)), 0); err != nil {
		t.Fatal(err)
	}
	<-entered
	if err := cluster.MoveTopicPartition("small", 0, 1-first); err != nil {
		t.Fatal(err)
	}
	if err := w.lookupAfresh("small"); err != nil { // the partition follows its new leader
		t.Fatal(err)
	}
	if err := w.Publish(ctx, ev(1, make([]byte, 3000)), 1); err != nil {
		t.Fatal(err)
	}
	o.wait(ctx, t, 2)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range overlaps {
		t.Error(s)
	}
	if f, _ := o.get(1); f.times != 1 || f.err != nil || f.reason != ReasonMessageTooLarge {
		t.Errorf("event 1: %d fates, err %v, reason %q; want 1, nil, %q", f.times, f.err, f.reason, ReasonMessageTooLarge)
	}
}
