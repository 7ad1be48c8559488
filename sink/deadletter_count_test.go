package sink

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestADeadLetterTooLargeForItsTopicIsCountedOnce: the broker refuses an
// event as too large, and its dead letter too (the dead-letter topic's
// max.message.bytes is lower still), so the dead letter goes again
// without its value. The event is dead-lettered once: counted once, and
// reported once, with the reason it was refused for.
func TestADeadLetterTooLargeForItsTopicIsCountedOnce(t *testing.T) {
	cluster := newCluster(t, kfake.NumBrokers(1))
	if err := cluster.CreateTopic("small", 1, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("smaller", 1, map[string]string{"max.message.bytes": "1500"}); err != nil {
		t.Fatal(err)
	}
	topic, _ := ParseTopic("small")
	o := newOutcomes()
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "smaller"}, o.done)
	ctx := testContext(t, 20*time.Second)
	ev := &decode.Event{ID: "0", AggregateType: "t", AggregateID: "k", EventType: "e", Payload: make([]byte, 3000)}
	if err := w.Publish(ctx, ev, 0); err != nil {
		t.Fatal(err)
	}
	o.wait(ctx, t, 1)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f, _ := o.get(0)
	if f.times != 1 || f.err != nil || f.reason != ReasonMessageTooLarge {
		t.Errorf("event 0: %d fates, err %v, reason %q; want 1, nil, %q", f.times, f.err, f.reason, ReasonMessageTooLarge)
	}
	if n := w.DeadLettered(); n != 1 {
		t.Errorf("DeadLettered() = %d after one event dead-lettered; want 1", n)
	}
}
