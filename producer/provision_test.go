package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopic: a topic created as its spec says has the spec's
// partitions; one another relay created first is no failure; one the
// broker refuses to create is a permanent *Error with
// ReasonTopicNotCreated, naming the topic and the fix.
func TestCreateTopic(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "exists"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	if err := CreateTopic(ctx, client, "created", TopicSpec{Partitions: 5}); err != nil {
		t.Fatalf("creating a topic: %v", err)
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"created"}})
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 5 {
		t.Fatalf("created: %+v, %v; want 5 partitions", md, err)
	}
	// Racing another relay: the topic exists by the time we ask.
	if err := CreateTopic(ctx, client, "exists", TopicSpec{Partitions: 2}); err != nil {
		t.Errorf("creating a topic that exists: %v, want success", err)
	}

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
	err = CreateTopic(ctx, client, "refused", TopicSpec{ReplicationFactor: 3})
	var perr *Error
	if !errors.As(err, &perr) || perr.Transient || perr.Reason != ReasonTopicNotCreated || perr.Topic != "refused" {
		t.Fatalf("refused creation: %v, want a permanent %s of topic refused", err, ReasonTopicNotCreated)
	}
	t.Logf("the one line: %v", err)
}
