package sink

import (
	"context"
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
// publishes to it.
func TestWriterCreatesMissingTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
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
}

// TestTopicCreationRefused: an event whose topic the broker refuses to
// create is dead-lettered like any event Kafka cannot accept (the
// refusal itself: producer's TestCreateTopic).
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
