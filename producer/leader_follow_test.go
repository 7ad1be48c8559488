package producer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestAnEventRoutedBeforeALookupLeavesThePartitionWithItsNewLeader forces
// enqueue's window: an event is routed by the cached leaders (place), a
// lookup learns meanwhile that its partition's leader moved and moves the
// partition to the new leader's sender, then the event is queued (push)
// with the leader it was routed by. The older leader must not move the
// partition back: its batch would go where the broker refuses it.
func TestAnEventRoutedBeforeALookupLeavesThePartitionWithItsNewLeader(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "events"))
	topic := "events"
	o := newOutcomes()
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond}, o.done)
	ctx := testContext(t, 20*time.Second)
	defer func() {
		if err := w.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if err := w.Publish(ctx, &event{ID: "0", AggregateType: "t", AggregateID: "k", EventType: "e", Payload: []byte(`{}`)}, 0); err != nil {
		t.Fatal(err)
	}
	o.wait(ctx, t, 1)
	msg := Outgoing{Topic: "events", Key: []byte("k"), Value: []byte(`{}`), Token: 1}
	c, id, err := w.place(ctx, &msg) // enqueue routes by the cached count and leaders
	if err != nil {
		t.Fatal(err)
	}
	old := c.leaders[id]
	if err := cluster.MoveTopicPartition("events", int32(id), 1-old); err != nil {
		t.Fatal(err)
	}
	if err := w.lookupAfresh("events"); err != nil { // a lookup meanwhile: the partition follows the new leader
		t.Fatal(err)
	}
	p := w.index.partition(topicPartition{"events", id})
	followed := p.leading()
	if followed == old {
		t.Fatalf("the lookup left partition %d with its old leader %d", id, old)
	}
	s, full, err := p.push(w.Writer, msg, c.leaders[id], c.at, false) // enqueue goes on with what it routed by
	if err != nil {
		t.Fatal(err)
	}
	s.enqueued(full)
	if now := p.leading(); now != followed {
		t.Errorf("the push moved partition %d back to its old leader %d (the lookup had moved it to %d): now %d", id, old, followed, now)
	}
	o.wait(ctx, t, 2)
	if f, _ := o.get(1); f.err != nil {
		t.Errorf("event 1: %v", f.err)
	}
}
