package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLeaderDiesWhileCached: the broker the writer knows as a partition's
// leader dies (every produce request to it breaks its connection) and
// leadership moves to the other broker. A connection failure says nothing
// of where the leader went, but a dead leader is the common reason for it,
// as a moved one is for NOT_LEADER: the retry must ask where the leader is
// (as the Java producer asks for metadata after a disconnection) instead
// of dialing the dead broker until the partition count's cache expires (a
// minute). In the three-broker suite this was the minute that every
// exactly-once transaction waited after a leader was killed.
func TestLeaderDiesWhileCached(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "dying"))
	old := cluster.LeaderFor("dying", 0)
	var dead atomic.Bool
	refused := make(chan struct{}, 1)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if dead.Load() && cluster.CurrentNode() == old {
			select {
			case refused <- struct{}{}:
			default:
			}
			return nil, errors.New("broker down"), true // kfake closes the connection
		}
		return nil, nil, false
	})

	const events = 20
	f := newFates(events)
	// The partition count's cache outlives the test's deadline: only a
	// lookup after the failure can find the new leader.
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: "dying", BatchSize: 50, BatchTimeout: time.Millisecond,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 20 * time.Millisecond, MetadataMaxAge: time.Hour, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish := func(i int) {
		ev := &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: []byte(fmt.Sprint(i))}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	publish(0) // learns the leader, and is acknowledged by it
	waitAcked(ctx, t, f, 1)
	dead.Store(true)
	if err := cluster.MoveTopicPartition("dying", 0, 1-old); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < events; i++ {
		publish(i)
	}
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatal("no produce request reached the dead leader")
	}
	f.wait(ctx, t, w) // every event acknowledged, and Close returned
}
