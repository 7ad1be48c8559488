package dlq

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

func TestPartitionIn(t *testing.T) {
	for _, tt := range []struct {
		column string
		n      int
		p      int32
		named  bool
		why    string // a part of it; empty: none
	}{
		{"", 4, 0, false, ""},
		{"0", 4, 0, true, ""},
		{"3", 4, 3, true, ""},
		{"+2", 4, 2, true, ""},
		{"4", 4, 4, true, "has 4 (0 to 3), and a replay does not move it"},
		{"-1", 4, -1, true, "named partition -1"},
		{"x", 4, 0, true, `named partition "x" (--column-partition), not a partition number`},
		{"4294967296", 4, 0, true, "not a partition number"},
	} {
		p, named, why := Entry{ColumnPartition: tt.column}.partitionIn("orders", tt.n)
		if p != tt.p || named != tt.named || tt.why == "" && why != "" || !strings.Contains(why, tt.why) {
			t.Errorf("%q of %d: %d, named %v, why %q; want %d, %v, %q", tt.column, tt.n, p, named, why, tt.p, tt.named, tt.why)
		}
	}
}

// TestReplayGoesWhereTheRowSaid: a dead letter whose row named its
// partition is published again to that partition, any other by its key
// (producer.ByKey), as the relay places it.
func TestReplayGoesWhereTheRowSaid(t *testing.T) {
	for _, tt := range []struct {
		column string
		want   int32
	}{{"", producer.ByKey}, {"0", 0}, {"2", 2}, {"+3", 3}} {
		e := Entry{ColumnPartition: tt.column, key: []byte("k")}
		if got := e.message("t").Partition; got != tt.want {
			t.Errorf("column %q: partition %d, want %d", tt.column, got, tt.want)
		}
	}
}

// TestReplayColumnPartition has sink's writer dead-letter events whose
// rows named their partition (out of range of a topic of 2, or refused by
// the broker as too large) and one that named none; once the topic has 4
// partitions and takes large records, a replay puts each where its row
// said, the one without by its key, and fails the one naming a partition
// the topic still lacks instead of sending it elsewhere.
func TestReplayColumnPartition(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	if err := cluster.CreateTopic("p", 2, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("dlq", 1, nil); err != nil {
		t.Fatal(err)
	}
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := []struct {
		key, partition string
		large          bool
		want           int // where the replay puts it; -1: the key's; -2: failed
	}{
		{"a", "3", false, 3}, // out of range of 2
		{"b", "5", false, -2},
		{"c", "1", true, 1}, // refused by the broker, dead-lettered by salvage
		{"d", "", true, -1},
	}
	var mu sync.Mutex
	fates := map[uint64]string{}
	route, _ := sink.ParseTopic("p")
	w := sink.NewWriter(sink.Config{Brokers: brokers, Topic: route, BatchTimeout: time.Millisecond, MissingTopicTimeout: 10 * time.Second,
		DeadLetterTopic: "dlq", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, func(token uint64, reason string, err error) {
		mu.Lock()
		defer mu.Unlock()
		fates[token] = fmt.Sprint(reason, err)
	})
	for i, ev := range events {
		payload := []byte("{}")
		if ev.large {
			payload = make([]byte, 4000)
			_, _ = rand.Read(payload)
		}
		if err := w.Publish(ctx, &decode.Event{ID: ev.key, AggregateID: ev.key, Payload: payload, Partition: ev.partition}, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(fates) != len(events) {
		t.Fatalf("fates %v, want %d", fates, len(events))
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "p", Count: 4}}}); err != nil || res.Errors["p"] != nil {
		t.Fatalf("create partitions: %v %v", err, res)
	}
	alter(ctx, t, brokers, "p", "max.message.bytes", "100000")

	cfg := Config{Brokers: brokers, Topic: "dlq"}
	all, err := List(ctx, cfg, Everything)
	if err != nil || len(all) != len(events) {
		t.Fatalf("%d dead letters (%v), want %d", len(all), err, len(events))
	}
	rep, err := Replay(ctx, cfg, Everything, Options{})
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]int{}
	for _, m := range readTopic(ctx, t, brokers, "p") {
		where[string(m.Key)] = m.Partition
		if _, ok := testkit.Header(m, sink.HeaderPartition); ok {
			t.Errorf("%s replayed with %s", m.Key, sink.HeaderPartition)
		}
	}
	outcome := map[string]Outcome{}
	for _, o := range rep.Outcomes {
		outcome[o.ID] = o
	}
	for _, ev := range events {
		o, p := outcome[ev.key], where[ev.key]
		if o.ColumnPartition != ev.partition {
			t.Errorf("%s: dead letter names partition %q, want the row's %q", ev.key, o.ColumnPartition, ev.partition)
		}
		switch want := ev.want; {
		case want == -2:
			if _, sent := where[ev.key]; o.Action != Failed || sent || !strings.Contains(o.Why, "partition 5") {
				t.Errorf("%s: %s (%s), sent %v; want failed, not sent", ev.key, o.Action, o.Why, sent)
			}
		case want == -1:
			want = (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(ev.key)}, 0, 1, 2, 3)
			fallthrough
		default:
			if _, sent := where[ev.key]; o.Action != Replayed || !sent || p != want {
				t.Errorf("%s: %s (%s), in partition %d (sent %v); want replayed to %d", ev.key, o.Action, o.Why, p, sent, want)
			}
		}
	}
}
