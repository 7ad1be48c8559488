package sink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestWriterCreatesMissingTopics: with auto-creation off at the broker, a
// writer creates an event's missing topic as its route's spec says, and
// publishes to it; a topic another relay created first is no failure.
func TestWriterCreatesMissingTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "exists"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	topic, _ := ParseTopic("created.{aggregate_type}")
	f := newFates(2)
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic.WithSpec(TopicSpec{Partitions: 5}), BatchSize: 10, BatchTimeout: time.Millisecond,
		CreateTopics: true, MissingTopicTimeout: 10 * time.Second}, f.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, typ := range []string{"order", "order"} {
		if err := w.Publish(ctx, &decode.Event{ID: "e", AggregateType: typ, AggregateID: "k", EventType: "x", Payload: []byte("{}")}, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.wait(ctx, t, w)
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"created.order"}})
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 5 {
		t.Fatalf("created.order: %+v, %v; want 5 partitions", md, err)
	}
	// Racing another relay: the topic exists by the time we ask.
	if err := createTopic(ctx, client, "exists", TopicSpec{Partitions: 2}); err != nil {
		t.Errorf("creating a topic that exists: %v, want success", err)
	}
}

// TestTopicCreationRefused: a refusal is a permanent error naming the topic
// and the fix, which the writer dead-letters like any event it cannot
// publish.
func TestTopicCreationRefused(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cluster.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.CreateTopicsRequest)
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, kerr.InvalidReplicationFactor.Code
			msg := "Replication factor: 3 larger than available brokers: 1."
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	err = createTopic(ctx, client, "refused", TopicSpec{ReplicationFactor: 3})
	var perr *Error
	if !errors.As(err, &perr) || perr.Transient || perr.Reason != ReasonTopicNotCreated {
		t.Fatalf("refused creation: %v, want a permanent %s", err, ReasonTopicNotCreated)
	}
	t.Logf("the one line: %v", err)

	topic, _ := ParseTopic("refused")
	f := newFates(1)
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchSize: 10, BatchTimeout: time.Millisecond, CreateTopics: true,
		TopicSpec: TopicSpec{ReplicationFactor: 3}, MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq"}, f.done)
	if err := w.Publish(ctx, &decode.Event{ID: "e", AggregateID: "k", Payload: []byte("{}")}, 0); err != nil {
		t.Fatal(err)
	}
	f.wait(ctx, t, w)
	if n := w.DeadLettered(); n != 1 {
		t.Errorf("%d dead letters, want the event whose topic was refused", n)
	}
}
