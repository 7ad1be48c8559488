package producer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPartitionsAddedKeepKeyOrder grows a topic from 1 to 4 partitions
// while events flow, the old partition's leader answering slowly and the
// new partitions on another broker: a key whose events move to a new
// partition must not have one acknowledged there before the events still
// queued for its old partition.
func TestPartitionsAddedKeepKeyOrder(t *testing.T) {
	besideOthersWhenShort(t)
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
	topic := "grow"
	const keys = 8
	events, maxAge := 600, time.Second
	if testing.Short() { // the count learned sooner, and events flowing for as many of its lookups
		events, maxAge = 300, 250*time.Millisecond
	}
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: topic, BatchSize: 100, BatchTimeout: time.Millisecond,
		MetadataMaxAge: maxAge, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publish := func(i int) {
		ev := &event{ID: fmt.Sprint(i), AggregateID: fmt.Sprintf("k%d", i%keys), Payload: []byte("{}")}
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
	for i := 100; i < events; i++ { // about 3 s (-short: 1 s): the writer sees the new count meanwhile
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
		k := tok % uint64(keys)
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

// TestPartitionDrainOutlivesLookups: a topic grows from 1 to 4 partitions
// while the old partition's batch is held by its leader and more of the
// key's events are queued behind it. Later lookups of the topic (a
// background refresh, a leader-move lookup) and a forgotten count must not
// clear the pending drain: the key's next event, routed to its new
// partition on another broker, is acknowledged only after the old ones.
func TestPartitionDrainOutlivesLookups(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "grow"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	old := cluster.LeaderFor("grow", 0)
	held, release := holdFirstProduce(cluster, old)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	key := ""
	for k := 0; key == ""; k++ { // a key that moves off partition 0
		if m := (kafka.Message{Key: []byte(fmt.Sprint("k", k))}); balancer.Balance(m, 0, 1, 2, 3) != 0 {
			key = string(m.Key)
		}
	}
	topic := "grow"
	const events = 5
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), Topic: topic, BatchSize: 100, BatchTimeout: time.Millisecond,
		MetadataMaxAge: 50 * time.Millisecond, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	publish := func(i int) error {
		return w.Publish(ctx, &event{ID: fmt.Sprint(i), AggregateID: key, Payload: []byte("{}")}, uint64(i))
	}
	for i := range events - 1 { // the first is held, the others queue behind it
		if err := publish(i); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-held
		}
	}
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "grow", Count: 4}}}); err != nil || res.Errors["grow"] != nil {
		t.Fatalf("create partitions: %v %v", err, res)
	}
	moved := balancer.Balance(kafka.Message{Key: []byte(key)}, 0, 1, 2, 3)
	if err := cluster.MoveTopicPartition("grow", int32(moved), 1-old); err != nil {
		t.Fatal(err)
	}
	waitLeader(ctx, t, w, "grow", moved, 1-old) // the count changed: a drain is pending
	if _, err := w.lookup(ctx, "grow"); err != nil {
		t.Fatal(err)
	}
	w.forgetCount("grow") // as a failed background refresh does

	published := make(chan error, 1)
	go func() { published <- publish(events - 1) }()
	select {
	case err := <-published: // routed at once: it must still wait for its ack
		if err != nil {
			t.Fatal(err)
		}
		for !f.ackedOne(events - 1) {
			select {
			case <-ctx.Done():
				t.Fatal("the new event was never acknowledged")
			case <-time.After(5 * time.Millisecond):
			}
		}
	case <-time.After(300 * time.Millisecond): // held back by the drain
	}
	close(release)
	released = true
	f.wait(ctx, t, w)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, tok := range f.order {
		if tok != uint64(i) {
			t.Fatalf("acknowledged in the order %v, want 0 to %d", f.order, events-1)
		}
	}
	t.Logf("key %s moved to partition %d; its old events acknowledged first: %v", key, moved, f.order)
}
