package sink

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestPartitionColumnRechecksAGrownTopic: the topic grows from 2 to 4
// partitions just after the writer (and kafka-go's transport under it)
// cached its count. Rows naming the new partitions are placed there, in
// the order they came, instead of being dead-lettered by the stale count;
// a stream of rows naming a partition still out of range is dead-lettered
// (with the partition the row named) after at most one more metadata
// request per recheckEvery.
// recheckEvery is the produce engine's bound on lookups past every cache
// for rows naming a partition out of range (producer/recheck.go): one per
// topic a second.
const recheckEvery = time.Second

func TestPartitionColumnRechecksAGrownTopic(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "grow"), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var asked atomic.Int64 // metadata requests naming grow alone: not the transport's own refreshes
	cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if r := req.(*kmsg.MetadataRequest); len(r.Topics) == 1 && r.Topics[0].Topic != nil && *r.Topics[0].Topic == "grow" {
			asked.Add(1)
		}
		return nil, nil, false
	})
	topic, _ := ParseTopic("grow")
	o := newOutcomes()
	// The default metadata ages: a minute for the writer, 6 s for kafka-go.
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq"}, o.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish := func(i int, partition string) {
		t.Helper()
		ev := &decode.Event{ID: fmt.Sprint(i), AggregateID: "k", Payload: []byte("{}"), Partition: partition}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, "1")
	o.wait(ctx, t, 1)
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "grow", Count: 4}}}); err != nil || res.Errors["grow"] != nil {
		t.Fatalf("create partitions: %v %v", err, res)
	}
	grown := []string{1: "3", 2: "3", 3: "2", 4: "3", 5: ""}
	for i := 1; i < len(grown); i++ {
		publish(i, grown[i])
	}
	o.wait(ctx, t, len(grown))
	for i := 1; i < len(grown); i++ {
		if f, _ := o.get(uint64(i)); f.err != nil || f.reason != "" {
			t.Fatalf("event %d naming partition %q of the grown topic: reason %q, err %v; want it published", i, grown[i], f.reason, f.err)
		}
	}

	if asked.Load() == 0 {
		t.Error("the brokers were never asked past kafka-go's cache")
	}

	// Rows naming a partition the topic still lacks, once the last lookup
	// is old enough to be asked again: dead-lettered, after one lookup per
	// recheckEvery at most.
	time.Sleep(recheckEvery)
	before, start := asked.Load(), time.Now()
	const bad = 20
	for i := len(grown); i < len(grown)+bad; i++ {
		publish(i, "7")
	}
	o.wait(ctx, t, len(grown)+bad)
	n, most := asked.Load()-before, 1+int64(time.Since(start)/recheckEvery)
	if n < 1 || n > most {
		t.Errorf("%d rows out of range asked the brokers %d times, want 1 to %d", bad, n, most)
	}
	t.Logf("the grown topic: %d lookups past the cache; %d rows out of range: %d", before, bad, n)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := len(grown); i < len(grown)+bad; i++ {
		if f, _ := o.get(uint64(i)); f.reason != ReasonPartitionOutOfRange {
			t.Fatalf("event %d naming partition 7 of 4: reason %q, err %v; want %s", i, f.reason, f.err, ReasonPartitionOutOfRange)
		}
	}
	ids := func(p int) []string {
		var out []string
		for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "grow", p) {
			id, _ := headerOf(m.Headers, "id")
			out = append(out, id)
		}
		return out
	}
	want := map[int][]string{3: {"1", "2", "4"}, 2: {"3"}} // and 5 by its key
	byKey := balancer.Balance(kafka.Message{Key: []byte("k")}, 0, 1, 2, 3)
	want[byKey] = append(want[byKey], "5")
	for _, p := range []int{2, 3} {
		if got := ids(p); !slices.Equal(got, want[p]) {
			t.Errorf("partition %d holds events %v, want %v in that order", p, got, want[p])
		}
	}
	dead := readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0)
	if len(dead) != bad {
		t.Errorf("%d dead letters, want %d", len(dead), bad)
	}
	for _, m := range dead {
		if p, _ := headerOf(m.Headers, HeaderPartition); p != "7" {
			t.Errorf("dead letter %s: %s %q, want the row's 7", m.Key, HeaderPartition, p)
		}
	}
}
