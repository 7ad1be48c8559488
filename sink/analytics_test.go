package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// fetched is a record as the broker keeps it: Null tells a null value from
// an empty one, which kafka-go's Reader does not (both read as nil).
type fetched struct {
	key, value []byte
	null       bool
	headers    []kafka.Header
	time       time.Time
}

// fetchAll reads partition p of topic through the Fetch API.
func fetchAll(ctx context.Context, t *testing.T, brokers []string, topic string, p int) []fetched {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch %s/%d: %v %v", topic, p, err, res.Error)
	}
	var out []fetched
	for {
		r, err := res.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read %s/%d: %v", topic, p, err)
		}
		f := fetched{null: r.Value == nil, headers: r.Headers, time: r.Time}
		if f.key, err = kafka.ReadAll(r.Key); err == nil && r.Value != nil {
			f.value, err = kafka.ReadAll(r.Value)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
}

// TestTombstoneIsANullValue: a tombstone is a record with its key and
// headers and a null value; an empty payload stays an empty value.
func TestTombstoneIsANullValue(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	topic, _ := ParseTopic("t")
	f := newFates(4)
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := []decode.Event{
		{ID: "0", AggregateID: "A", EventType: "set", Payload: []byte(`{"v":1}`)},
		{ID: "1", AggregateID: "A", EventType: "deleted", Tombstone: true, Headers: []decode.Header{{Key: "trace", Value: []byte("t-1")}}},
		{ID: "2", AggregateID: "E", EventType: "set", Payload: []byte{}},
		{ID: "3", AggregateID: "N", EventType: "set"}, // no payload, not a tombstone: empty
	}
	for i := range events {
		if err := w.Publish(ctx, &events[i], uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.wait(ctx, t, w)
	recs := fetchAll(ctx, t, cluster.ListenAddrs(), "t", 0)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	for i, want := range []struct {
		key, value string
		null       bool
	}{{"A", `{"v":1}`, false}, {"A", "", true}, {"E", "", false}, {"N", "", false}} {
		r := recs[i]
		if string(r.key) != want.key || string(r.value) != want.value || r.null != want.null {
			t.Errorf("record %d: key %q value %q null %v, want %q %q null %v", i, r.key, r.value, r.null, want.key, want.value, want.null)
		}
	}
	if id, _ := headerOf(recs[1].headers, "id"); id != "1" {
		t.Errorf("tombstone's id header %q, want 1", id)
	}
	if tr, _ := headerOf(recs[1].headers, "trace"); tr != "t-1" {
		t.Errorf("tombstone's trace header %q, want the row's t-1", tr)
	}
}

// TestPartitionColumn: a row's partition column places its record; one
// that names no partition of the topic is dead-lettered with its reason.
func TestPartitionColumn(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "p"), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	topic, _ := ParseTopic("p")
	o := newOutcomes()
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq"}, o.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		partition string
		want      int    // the partition it lands in; -1: by key
		reason    string // dead-lettered
	}{
		{"0", 0, ""}, {"1", 1, ""}, {"2", 2, ""}, {"", -1, ""}, {"+2", 2, ""},
		{"3", 0, ReasonPartitionOutOfRange}, {"-1", 0, ReasonPartitionOutOfRange},
		{"4294967296", 0, ReasonPartitionOutOfRange},
		{"x", 0, ReasonInvalidPartition}, {"1.5", 0, ReasonInvalidPartition}, {" 1", 0, ReasonInvalidPartition},
	}
	byKey := balancer.Balance(kafka.Message{Key: []byte("k")}, 0, 1, 2)
	for i, tt := range tests {
		ev := &decode.Event{ID: fmt.Sprint(i), AggregateID: "k", EventType: "e", Payload: []byte("{}"), Partition: tt.partition}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	o.wait(ctx, t, len(tests))
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	where := map[string]int{}
	for p := range 3 {
		for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "p", p) {
			id, _ := headerOf(m.Headers, "id")
			where[id] = p
		}
	}
	dead := map[string]string{}
	for _, m := range readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0) {
		id, _ := headerOf(m.Headers, "id")
		dead[id], _ = headerOf(m.Headers, HeaderReason)
	}
	for i, tt := range tests {
		id := fmt.Sprint(i)
		fate, _ := o.get(uint64(i))
		switch {
		case fate.err != nil:
			t.Errorf("partition %q: failed: %v", tt.partition, fate.err)
		case tt.reason != "" && (fate.reason != tt.reason || dead[id] != tt.reason):
			t.Errorf("partition %q: fate %q, dead letter's reason %q, want %s", tt.partition, fate.reason, dead[id], tt.reason)
		case tt.reason == "" && tt.want < 0 && where[id] != byKey:
			t.Errorf("no partition column: in partition %d, want the key's %d", where[id], byKey)
		case tt.reason == "" && tt.want >= 0 && where[id] != tt.want:
			t.Errorf("partition %q: in partition %d", tt.partition, where[id])
		}
	}
}

// TestPartitionColumnAfterGrowth: a row naming a partition added to the
// topic since the writer learnt its count is placed there once a fresh
// lookup knows it, not dead-lettered by the stale count.
func TestPartitionColumnAfterGrowth(t *testing.T) {
	besideOthersWhenShort(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "grow"), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	topic, _ := ParseTopic("grow")
	o := newOutcomes()
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond, MetadataMaxAge: time.Second,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq"}, o.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish := func(i int, partition string) {
		if err := w.Publish(ctx, &decode.Event{ID: fmt.Sprint(i), AggregateID: "k", Payload: []byte("{}"), Partition: partition}, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, "1")
	o.wait(ctx, t, 1)
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "grow", Count: 4}}}); err != nil || res.Errors["grow"] != nil {
		t.Fatalf("create partitions: %v %v", err, res)
	}
	// Past the transport's metadata cache (MetadataMaxAge), while the
	// writer still routes by the count it cached: it answers that first.
	time.Sleep(1100 * time.Millisecond)
	publish(1, "3")
	o.wait(ctx, t, 2)
	if f, _ := o.get(1); f.err != nil || f.reason != "" {
		t.Fatalf("event for the new partition 3: reason %q, err %v; want it published", f.reason, f.err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(readPartition(ctx, t, cluster.ListenAddrs(), "grow", 3)); n != 1 {
		t.Errorf("partition 3 holds %d records, want 1", n)
	}
}

// TestRecordTimestamp: --timestamp column (the default) stamps a record
// with the event's time (its timestamp column), commit with its
// transaction's commit time.
func TestRecordTimestamp(t *testing.T) {
	created := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	committed := created.Add(1500 * time.Millisecond)
	for _, tt := range []struct {
		ts   Timestamp
		want time.Time
	}{{"", created}, {TimestampColumn, created}, {TimestampCommit, committed}} {
		t.Run(string(tt.ts), func(t *testing.T) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			topic, _ := ParseTopic("t")
			f := newFates(1)
			w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchTimeout: time.Millisecond,
				MissingTopicTimeout: 10 * time.Second, Timestamp: tt.ts}, f.done)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ev := &decode.Event{ID: "0", AggregateID: "k", Payload: []byte("{}"), Time: created, CommitTime: committed}
			if err := w.Publish(ctx, ev, 0); err != nil {
				t.Fatal(err)
			}
			f.wait(ctx, t, w)
			recs := fetchAll(ctx, t, cluster.ListenAddrs(), "t", 0)
			if len(recs) != 1 || !recs[0].time.Equal(tt.want) {
				t.Errorf("records %+v, want one stamped %s", recs, tt.want)
			}
		})
	}
}
