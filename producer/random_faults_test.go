package producer

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProducerUnderRandomFaults drives the writer against a 3-broker fake
// cluster that fails partitions of produce requests at random (some after
// writing them, which makes duplicates), delays requests, moves partition
// leaders every few tens of milliseconds, and grows the topic from 3 to 5
// partitions halfway. The model is a log per key: every event is
// acknowledged exactly once, acknowledgements follow publish order per key,
// every event is in the topic, and reading the partitions, each key's events
// first appear in publish order, within a partition and across the old and
// new partition of a key that moved. Duplicates are allowed (at least
// once) and counted.
func TestProducerUnderRandomFaults(t *testing.T) {
	besideOthersWhenShort(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	coin := &chance{rng: rand.New(rand.NewPCG(seed, seed>>1))}
	cluster := newFakeCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "chaos"))
	var delayed atomic.Int64
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if coin.below(0.05) {
			delayed.Add(1)
			d := time.Duration(5+coin.intN(25)) * time.Millisecond
			cluster.SleepControl(func() { time.Sleep(d) })
		}
		return nil, nil, false
	})
	faults := injectRandomFaults(cluster, coin, "chaos",
		randomFault{kerr.NotLeaderForPartition, 0.06},
		randomFault{kerr.NotEnoughReplicas, 0.03},
		randomFault{kerr.RequestTimedOut, 0.03}, // written, then answered as timed out: the retry duplicates it
	)

	events, keys := sized(3000, 1000), 30
	cfg := testConfig{BatchSize: 20, MetadataMaxAge: 100 * time.Millisecond}
	if testing.Short() { // the same faults, retried sooner: a run mostly waits out backoffs
		cfg.RetryBackoffMin, cfg.RetryBackoffMax = 10*time.Millisecond, 200*time.Millisecond
	}
	ctx, w, f := keyedWriter(t, cluster, "chaos", events, cfg)
	stopMoving := moveLeaders(cluster, coin, "chaos", 3, 30*time.Millisecond) // until every event is published
	for i := range events {
		if i == events/2 {
			client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
			if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "chaos", Count: 5}}}); err != nil || res.Errors["chaos"] != nil {
				t.Fatalf("create partitions: %v %v", err, res)
			}
		}
		if err := w.Publish(ctx, keyedEvent(i, keys), uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%10 == 0 {
			time.Sleep(4 * time.Millisecond) // about 1.5 s: requests interleave with moves and the growth
		}
	}
	moves := stopMoving()
	// Each event acknowledged once, no failure, Close returned; order kept per key.
	total, distinct, moved := checkKeyed(ctx, t, f, w, keys, cluster, "chaos", 5)
	if distinct != events {
		t.Errorf("%d distinct events in the topic, want %d", distinct, events)
	}
	if faults.Hits() == 0 || moves == 0 || moved == 0 {
		t.Fatalf("%d faults, %d leader moves, %d keys moved to a new partition: the test proves too little", faults.Hits(), moves, moved)
	}
	t.Logf("%d events: %d partition faults, %d delayed requests, %d leader moves, 3 → 5 partitions (%d keys moved); %d records, %d duplicates, order kept per key",
		events, faults.Hits(), delayed.Load(), moves, moved, total, total-distinct)
}
