package producer

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTrickleBesideBacklog: one broker leads "bulk", which has a backlog
// (full batches keep requests out), and "trickle", which gets one event.
// Beside a request out only full batches go, and a backlog keeps a request
// out all the time: the trickle's lone event waited for the whole backlog
// (found by review: acknowledged after the backlog's last event). It must
// go once it waited as long as it would have without pipelining.
func TestTrickleBesideBacklog(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "bulk", "trickle"))
	slowProduce(cluster, 10*time.Millisecond)
	var mu sync.Mutex
	acked := map[uint64]time.Time{}
	all := make(chan struct{})
	bulk := uint64(sized(4000, 2000)) // the backlog: tokens 0 to bulk-1; the trickle is bulk
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), BatchSize: 10, BatchTimeout: 2 * time.Millisecond,
		MissingTopicTimeout: 10 * time.Second}, func(token uint64, _ string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("event %d failed: %v", token, err)
		}
		acked[token] = time.Now()
		if uint64(len(acked)) == bulk+1 {
			close(all)
		}
	})
	ctx := testContext(t, time.Minute)
	// Warm both topics' metadata and the connection.
	if err := w.PublishTo(ctx, "trickle", &event{ID: "w", AggregateType: "trickle", AggregateID: "x", EventType: "e", Payload: []byte("0")}, bulk+100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	for i := range bulk {
		ev := &event{ID: fmt.Sprint(i), AggregateType: "bulk", AggregateID: "b", EventType: "e", Payload: []byte("x")}
		if err := w.PublishTo(ctx, "bulk", ev, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the backlog is being sent
	sent := time.Now()
	if err := w.PublishTo(ctx, "trickle", &event{ID: "t", AggregateType: "trickle", AggregateID: "x", EventType: "e", Payload: []byte("1")}, bulk); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatal("not every event acknowledged")
	}
	_ = w.Close(ctx)
	mu.Lock()
	defer mu.Unlock()
	after := 0 // the backlog's events acknowledged after the trickle's
	for i := range bulk {
		if acked[i].After(acked[bulk]) {
			after++
		}
	}
	t.Logf("the trickle's event took %s; %d of the backlog's %d events were acknowledged after it", acked[bulk].Sub(sent), after, bulk)
	if uint64(after) < bulk/4 {
		t.Errorf("the trickle's lone event was acknowledged behind the other topic's backlog: only %d of %d events after it", after, bulk)
	}
}
