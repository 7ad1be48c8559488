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

// TestLeaderMovesWhileBatchInFlight: a partition's batch is held by its slow
// leader while leadership moves to another broker and the writer learns it,
// so the partition moves to the other broker's sender with its batch still
// out and more events queued behind it. When the old leader answers, the
// batch is retried (it answers NOT_LEADER) or acknowledged (leadership came
// back meanwhile); either way the new sender must carry on without waiting
// for unrelated traffic: everything is acknowledged, each key in order, and
// Close returns.
func TestLeaderMovesWhileBatchInFlight(t *testing.T) {
	t.Run("retried", func(t *testing.T) { leaderMovesWhileBusy(t, false) })
	t.Run("acknowledged", func(t *testing.T) { leaderMovesWhileBusy(t, true) })
}

func leaderMovesWhileBusy(t *testing.T, back bool) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "moving"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	old := cluster.LeaderFor("moving", 0)
	held, release := holdFirstProduce(cluster, old)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	topic := "moving"
	const events, keys = 200, 4
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: topic, BatchSize: 50, BatchTimeout: time.Millisecond,
		MetadataMaxAge: 50 * time.Millisecond, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	publish := func(i int) {
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprintf("k%d", i%keys), EventType: "e",
			Payload: binary.BigEndian.AppendUint32(nil, uint32(i/keys))}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	publish(0)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the first batch never reached its leader")
	}
	if err := cluster.MoveTopicPartition("moving", 0, 1-old); err != nil {
		t.Fatal(err)
	}
	waitLeader(ctx, t, w, "moving", 0, 1-old) // the partition follows, its batch still out
	for i := 1; i < events; i++ {
		publish(i)
	}
	if back {
		if err := cluster.MoveTopicPartition("moving", 0, old); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	f.wait(ctx, t, w) // every event acknowledged once, and Close returned

	next := map[string]uint32{}
	seen := map[string]bool{}
	total := 0
	for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "moving", 0) {
		total++
		if id, _ := headerOf(m.Headers, "id"); seen[id] {
			continue
		} else {
			seen[id] = true
		}
		if n := binary.BigEndian.Uint32(m.Value); n != next[string(m.Key)] {
			t.Errorf("key %s: event %d first written when %d was next", m.Key, n, next[string(m.Key)])
		}
		next[string(m.Key)]++
	}
	if len(seen) != events {
		t.Errorf("%d distinct events in the topic, want %d", len(seen), events)
	}
	t.Logf("leader %d → %d (back: %v) with a batch out: %d events acknowledged once, %d records (%d duplicates), order kept per key",
		old, 1-old, back, events, total, total-len(seen))
}

// waitLeader asks the writer where topic's partition id is led until it
// answers leader, so that the partition has moved to that broker's sender.
func waitLeader(ctx context.Context, t *testing.T, w *testWriter, topic string, id int, leader int32) {
	t.Helper()
	for {
		c, err := w.lookup(ctx, topic)
		if err == nil && len(c.leaders) > id && c.leaders[id] == leader {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the writer never saw %s/%d led by %d (last: %v, %v)", topic, id, leader, c.leaders, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// holdFirstProduce makes broker node hold the first produce request it gets
// until release is closed; held is closed once it holds it.
func holdFirstProduce(cluster *kfake.Cluster, node int32) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	holding.Store(true)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if cluster.CurrentNode() == node && holding.CompareAndSwap(true, false) {
			close(held)
			cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return held, release
}
