package sink

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestPartitionsAddedKeepKeyOrder grows a topic from 1 to 4 partitions
// while events flow, the old partition's leader answering slowly and the
// new partitions on another broker: a key whose events move to a new
// partition must not have one acknowledged there before the events still
// queued for its old partition.
func TestPartitionsAddedKeepKeyOrder(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "grow"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	slowNode := cluster.LeaderFor("grow", 0)
	var slowing atomic.Bool
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if slowing.Load() && cluster.CurrentNode() == slowNode {
			cluster.SleepControl(func() { time.Sleep(150 * time.Millisecond) })
		}
		return nil, nil, false
	})
	topic, _ := ParseTopic("grow")
	const events, keys = 600, 8
	f := newFates(events)
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchSize: 100, BatchTimeout: time.Millisecond,
		MetadataMaxAge: time.Second, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publish := func(i int) {
		ev := &decode.Event{ID: fmt.Sprint(i), AggregateID: fmt.Sprintf("k%d", i%keys), Payload: []byte("{}")}
		for {
			err := w.Publish(ctx, ev, uint64(i))
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	for i := range 100 {
		publish(i)
	}
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "grow", Count: 4}}}); err != nil || res.Errors["grow"] != nil {
		t.Fatalf("create partitions: %v %v", err, res)
	}
	for p := int32(1); p < 4; p++ {
		if err := cluster.MoveTopicPartition("grow", p, 1-slowNode); err != nil && cluster.LeaderFor("grow", p) == slowNode {
			t.Fatalf("move partition %d off the slow broker: %v", p, err)
		}
	}
	slowing.Store(true)
	for i := 100; i < events; i++ { // about 3 s: the writer sees the new count meanwhile
		publish(i)
		time.Sleep(5 * time.Millisecond)
	}
	f.wait(ctx, t, w)

	moved := 0
	for k := range keys {
		msg := kafka.Message{Key: []byte(fmt.Sprintf("k%d", k))}
		if balancer.Balance(msg, 0) != balancer.Balance(msg, 0, 1, 2, 3) {
			moved++
		}
	}
	last := map[uint64]uint64{} // key → last token acknowledged
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tok := range f.order {
		k := tok % keys
		if prev, ok := last[k]; ok && tok < prev {
			t.Errorf("key k%d: event %d acknowledged after event %d", k, tok, prev)
		}
		last[k] = tok
	}
	if moved == 0 {
		t.Fatal("no key changes partition: the test proves nothing")
	}
	t.Logf("1 → 4 partitions under load, %d of %d keys moved; acknowledgements in order per key", moved, keys)
}
