package sink

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestReservedTopicsAreRefused: whatever a route's template, rewrite or
// column makes of a row, and whatever its allow-list admits, an event is
// never admitted to the dead-letter topic, the checkpoint topic or a
// topic of Kafka's own (a __ name): each is refused as topic_not_allowed,
// and none is counted against the cap.
func TestReservedTopicsAreRefused(t *testing.T) {
	reserved := Reserved{DeadLetter: "app.dlq", Checkpoint: "app.checkpoints"}
	limit := NewTopicLimit(10, nil)
	build := func(template, regex, replacement string) Topic {
		t.Helper()
		route, err := ParseTopic(template)
		if err == nil {
			route, err = route.Rewrite(regex, replacement)
		}
		if err == nil {
			route, err = route.Allow(`.*`) // an allow-list that admits every name does not admit these
		}
		if err != nil {
			t.Fatal(err)
		}
		return route.Limit(limit)
	}
	byType := build("{aggregate_type}", "", "")
	byColumn := build("{topic}", "", "")
	rewritten := build("ev.{aggregate_type}", `ev\.(.*)`, "$1")
	for _, name := range []string{"app.dlq", "app.checkpoints", "__consumer_offsets", "__transaction_state", "__cluster_metadata", "__x"} {
		for _, tt := range []struct {
			how   string
			route Topic
			ev    *decode.Event
		}{
			{"template", byType, &decode.Event{AggregateType: name}},
			{"column", byColumn, &decode.Event{Fields: map[string]string{"topic": name}}},
			{"rewrite", rewritten, &decode.Event{AggregateType: name}},
		} {
			routed := tt.route.Name(tt.ev)
			if routed != name {
				t.Fatalf("%s: routed to %q, want %q", tt.how, routed, name)
			}
			perr := tt.route.Admit(routed, reserved)
			if perr == nil || perr.Reason != ReasonTopicNotAllowed || perr.Topic != name || perr.Transient {
				t.Errorf("%s routing to %s: admitted as %v, want refused permanently as %s", tt.how, name, perr, ReasonTopicNotAllowed)
			}
		}
	}
	for _, name := range []string{"orders", "_schemas_x", "a__b", "app.dlq2", "app.checkpoints.v2"} {
		if perr := byType.Admit(name, reserved); perr != nil {
			t.Errorf("%s refused: %v", name, perr)
		}
	}
	if n := limit.Len(); n != 5 {
		t.Errorf("%d topics counted against the cap, want the 5 admitted", n)
	}
}

// TestWriterRefusesReservedTopics: the writer admits by its Config's
// reserved topics: a row routed to the checkpoint topic, or to the
// dead-letter topic itself, is dead-lettered as topic_not_allowed, and
// nothing but dead letters reaches either.
func TestWriterRefusesReservedTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq", "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	route, _ := ParseTopic("{aggregate_type}")
	var mu sync.Mutex
	reasons := map[uint64]string{}
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: route, DeadLetterTopic: "dlq", Reserved: Reserved{Checkpoint: "ckpt"},
		MissingTopicTimeout: 10 * time.Second}, func(token uint64, reason string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			reason = "failed: " + err.Error()
		}
		reasons[token] = reason
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, to := range []string{"ckpt", "dlq"} {
		if err := w.Publish(ctx, &decode.Event{ID: to, AggregateType: to, AggregateID: "k", EventType: "e"}, uint64(i)); err != nil {
			t.Fatalf("publish to %s: %v", to, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, to := range []string{"ckpt", "dlq"} {
		if reasons[uint64(i)] != ReasonTopicNotAllowed {
			t.Errorf("an event routed to %s: fate %q, want dead-lettered as %s", to, reasons[uint64(i)], ReasonTopicNotAllowed)
		}
	}
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	for topic, want := range map[string]int64{"ckpt": 0, "dlq": 2} {
		res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Topics[topic][0].LastOffset; got != want {
			t.Errorf("%s holds %d records, want %d", topic, got, want)
		}
	}
}
