package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
)

// TestCheckpointPartition holds checkpointPartition to franz-go's default partitioner, an
// implementation independent of kafka-go's, which places keyed records as
// the Java client does.
func TestCheckpointPartition(t *testing.T) {
	franz := kgo.StickyKeyPartitioner(nil).ForTopic(ckptTopic)
	for _, n := range []int{1, 2, 3, 5, 12, 50} {
		for i := range 200 {
			key := checkpoint.Key(fmt.Sprint(7312345678901234567+i), fmt.Sprintf("slot_%d", i%7))
			want := franz.Partition(&kgo.Record{Key: []byte(key)}, n)
			if got := checkpointPartition(key, n); got != want {
				t.Fatalf("partition of %q in %d: %d, franz-go says %d", key, n, got, want)
			}
		}
	}
}

func TestMinInsync(t *testing.T) {
	for rf, want := range map[int]int{1: 1, 2: 1, 3: 2, 4: 3, 5: 3, 7: 4} {
		if got := minInsync(rf); got != want {
			t.Errorf("min.insync.replicas for %d replicas: %d, want %d", rf, got, want)
		}
	}
}

// topicState reads what a checkpoint topic is: its partition count and the
// configs EnsureCheckpointTopic sets.
func topicState(t *testing.T, client *kafka.Client, name string) (int, map[string]string) {
	t.Helper()
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{name}})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil {
		t.Fatalf("metadata of %s: %v %+v", name, err, md)
	}
	res, err := client.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: name, ConfigNames: []string{"cleanup.policy", "min.insync.replicas", "segment.bytes"},
	}}})
	if err != nil || len(res.Resources) != 1 || res.Resources[0].Error != nil {
		t.Fatalf("configs of %s: %v %+v", name, err, res)
	}
	cfg := map[string]string{}
	for _, e := range res.Resources[0].ConfigEntries {
		cfg[e.ConfigName] = e.ConfigValue
	}
	return len(md.Topics[0].Partitions), cfg
}

func TestEnsureCheckpointTopic(t *testing.T) {
	_, cl := newCheckpointCluster(t, 0)
	ctx := context.Background()
	created, err := cl.EnsureCheckpointTopic(ctx, "cp", 1)
	if err != nil || !created {
		t.Fatalf("ensure a missing topic: created %v, %v", created, err)
	}
	n, cfg := topicState(t, cl.client, "cp")
	if n != 1 || cfg["cleanup.policy"] != "compact" || cfg["min.insync.replicas"] != "1" || cfg["segment.bytes"] != fmt.Sprint(segmentBytes) {
		t.Errorf("created %d partitions, %v; want 1, compact, min.insync.replicas 1, segment.bytes %d", n, cfg, segmentBytes)
	}
	if created, err := cl.EnsureCheckpointTopic(ctx, "cp", 1); err != nil || created {
		t.Errorf("ensure it again: created %v, %v; want neither", created, err)
	}

	// Made beforehand by someone else: checked, never changed.
	for _, tc := range []kafka.TopicConfig{
		{Topic: "compacted", NumPartitions: 3, ReplicationFactor: 1, ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}},
		{Topic: "deleting", NumPartitions: 1, ReplicationFactor: 1},
		{Topic: "both", NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact,delete"}}},
	} {
		res, err := cl.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
		if err != nil || res.Errors[tc.Topic] != nil {
			t.Fatalf("create %s: %v %v", tc.Topic, err, res)
		}
	}
	tests := []struct {
		topic   string
		wantErr error
		says    string
	}{
		{"compacted", nil, ""},
		{"deleting", checkpoint.ErrNotCompacted, "deleting has cleanup.policy=delete"},
		{"both", checkpoint.ErrNotCompacted, "--add-config cleanup.policy=compact"},
	}
	for _, tt := range tests {
		t.Run(tt.topic, func(t *testing.T) {
			created, err := cl.EnsureCheckpointTopic(ctx, tt.topic, 1)
			if created || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("ensure: created %v, %v; want %v", created, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			if _, cfg := topicState(t, cl.client, tt.topic); tt.wantErr != nil && cfg["cleanup.policy"] == "compact" {
				t.Error("EnsureCheckpointTopic changed the topic")
			}
		})
	}
}
