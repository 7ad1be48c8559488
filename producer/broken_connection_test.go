package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestAConnectionBrokenBesideAnotherBrokersDial: one broker's connection
// breaks and its next dial fails (breakConnection, from its sender's own
// goroutine) while another broker's sender dials its first connection.
// Both partitions' events are acknowledged, and, under -race, the hook
// itself races with no sender's dial.
func TestAConnectionBrokenBesideAnotherBrokersDial(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "split"))
	infos := cluster.PartitionInfos("split")
	first := infos[0].Leader
	if infos[1].Leader == first {
		if err := cluster.MoveTopicPartition("split", 1, 1-first); err != nil {
			t.Fatal(err)
		}
	}
	var holds atomic.Int32
	var brk *dialBreaker
	hold := func(context.Context) {
		if holds.Add(1) == 2 { // partition 0's second request, on its sender's goroutine
			brk.breakConnection(first)
			time.Sleep(100 * time.Millisecond) // partition 1's sender dials meanwhile
		}
	}
	ctx, w, f := keyedWriter(t, cluster, "split", 3, testConfig{Hold: hold})
	brk = w.dialBreaker() // before the first event: no sender runs yet
	ev := func(i int, partition string) *event {
		e := keyedEvent(i, 1)
		e.Partition = partition
		return e
	}
	for i, part := range []string{"0", "0"} {
		if err := w.Publish(ctx, ev(i, part), uint64(i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.Publish(ctx, ev(2, "1"), 2); err != nil {
		t.Fatal(err)
	}
	f.wait(ctx, t, w)
}
