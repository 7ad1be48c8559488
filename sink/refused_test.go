package sink

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestRefusedEventHoldsItsSuccessors: the broker refuses one event of a key
// as larger than the topic's max.message.bytes (the writer's own limit is
// higher). Without a dead-letter topic that event fails the stream, and no
// later event of its partition, in its batch, queued behind it or published
// after, may be written or acknowledged: once the topic is fixed and the
// relay restarted, the failed event must land before them. With a
// dead-letter topic the event is dead-lettered, its fate settled, and its
// successors follow it.
func TestRefusedEventHoldsItsSuccessors(t *testing.T) {
	for _, dlq := range []string{"", "dlq"} {
		name := "fail"
		if dlq != "" {
			name = "dead-letter"
		}
		t.Run(name, func(t *testing.T) { refusedEvent(t, dlq) })
	}
}

func refusedEvent(t *testing.T, dlq string) {
	cluster := newCluster(t, kfake.NumBrokers(1))
	ctx, w, o := smallTopicWriter(t, cluster, dlq)
	const refused, events = 5, 11
	publish := func(i int) {
		payload := []byte(fmt.Sprintf(`{"n": %d}`, i))
		if i == refused {
			payload = bytes.Repeat([]byte("x"), 3000)
		}
		ev := &decode.Event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: payload}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	for i := range events - 1 { // one batch, or a few: either way behind or beside the refused one
		publish(i)
	}
	o.wait(ctx, t, events-1)
	publish(events - 1) // after the refusal is known
	o.wait(ctx, t, events)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var want []string // what the topic must hold, in order
	for i := range uint64(events) {
		f, _ := o.get(i)
		switch {
		case f.times != 1:
			t.Errorf("event %d: %d fates reported", i, f.times)
		case i < refused && f.err != nil:
			t.Errorf("event %d, before the refused one, failed: %v", i, f.err)
		case i == refused && dlq == "" && f.err == nil:
			t.Errorf("the refused event was acknowledged (reason %q) with no dead-letter topic", f.reason)
		case i == refused && dlq != "" && (f.err != nil || f.reason != ReasonMessageTooLarge):
			t.Errorf("the refused event: reason %q, err %v; want dead-lettered as %s", f.reason, f.err, ReasonMessageTooLarge)
		case i > refused && dlq == "" && f.err == nil:
			t.Errorf("event %d, after the refused one, was acknowledged: it would overtake it once the topic is fixed", i)
		case i > refused && dlq != "" && f.err != nil:
			t.Errorf("event %d, after a dead-lettered one, failed: %v", i, f.err)
		}
		if i < refused || i > refused && dlq != "" {
			want = append(want, fmt.Sprint(i))
		}
	}
	var got []string
	for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "small", 0) {
		got = append(got, string(m.Headers[0].Value))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the topic holds events %v, want %v", got, want)
	}
	if dlq != "" {
		dead := readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0)
		if len(dead) != 1 {
			t.Fatalf("%d dead letters, want 1", len(dead))
		}
		if id, _ := headerOf(dead[0].Headers, "id"); id != fmt.Sprint(refused) {
			t.Errorf("dead letter of event %q, want %d", id, refused)
		}
	}
	t.Logf("topic holds %v; event %d refused (dead-letter topic %q)", got, refused, dlq)
}
