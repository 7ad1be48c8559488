package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
)

// checkpointPartition returns the partition of key in a topic of n partitions: the
// positive murmur2 hash of the key's bytes modulo n, where the Java
// client's default partitioner (and franz-go's, and kafka-go's
// Murmur2Balancer, not its Hash) places a keyed record. The topic
// EnsureCheckpointTopic creates has one partition, where this is 0; a topic made
// beforehand with more works as well, as long as its partition count never
// changes: a change moves keys, the checkpoint is then missing, and the
// relay falls back to the slot (duplicates, never a loss).
func checkpointPartition(key string, n int) int {
	if n <= 1 {
		return 0
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return kafka.Murmur2Balancer{Consistent: true}.Balance(kafka.Message{Key: []byte(key)}, ids...)
}

// segmentBytes is the segment size of a topic EnsureCheckpointTopic creates, and the
// largest fetch ReadCheckpoint sends. The log cleaner compacts closed segments
// only, and ReadCheckpoint reads the uncompacted tail behind a slot's last
// record: small segments keep that tail to a few of them, a fetch or so
// each, rather than Kafka's default of 1 GiB.
const segmentBytes = 16 << 20

// topicConfigs are the configs EnsureCheckpointTopic creates the topic with, for a
// replication factor rf (zero or less: the broker's default, whose
// min.insync.replicas is then the broker's too).
func topicConfigs(rf int) map[string]string {
	cfg := map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.Itoa(segmentBytes),
	}
	if rf > 0 {
		cfg["min.insync.replicas"] = strconv.Itoa(minInsync(rf))
	}
	return cfg
}

// minInsync is min.insync.replicas for rf replicas: a majority, so that a
// committed checkpoint survives the loss of any minority, but at most rf-1,
// so that one broker down does not stop the relay (1 for 1 or 2 replicas,
// 2 for 3, 3 for 4 or 5).
func minInsync(rf int) int {
	return max(1, min(rf/2+1, rf-1))
}

// EnsureCheckpointTopic creates the checkpoint topic if it does not exist: compacted
// (one record kept per slot), one partition, replication rf (zero or less
// for the broker's default). A topic that exists is checked, not changed:
// one whose cleanup.policy is not exactly "compact" is refused with
// checkpoint.ErrNotCompacted and the command that fixes it, since deletion by
// retention would lose an idle slot's checkpoint. It reports whether it
// created the topic.
func (c *Cluster) EnsureCheckpointTopic(ctx context.Context, topic string, rf int) (bool, error) {
	exists, _, err := c.describeTopic(ctx, topic)
	if err != nil {
		return false, err
	}
	if !exists {
		created, err := c.createTopic(ctx, topic, rf)
		if err != nil || created {
			return created, err
		}
		// Another relay created it first: check what it made.
	}
	return false, c.checkCompacted(ctx, topic)
}

// describeTopic reports whether topic exists, and its partition count.
// kafka-go's transport answers from its metadata cache, refreshed every
// few seconds and after each CreateTopics it sends.
func (c *Cluster) describeTopic(ctx context.Context, topic string) (bool, int, error) {
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return false, 0, fmt.Errorf("kafka metadata of %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		switch {
		case t.Name != topic:
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			return false, 0, nil
		case t.Error != nil:
			return false, 0, fmt.Errorf("kafka metadata of %s: %w", topic, t.Error)
		default:
			return true, len(t.Partitions), nil
		}
	}
	return false, 0, nil
}

// createTopic creates topic as EnsureCheckpointTopic says; it reports false when the
// topic already existed.
func (c *Cluster) createTopic(ctx context.Context, topic string, rf int) (bool, error) {
	tc := kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: rf}
	if rf <= 0 {
		tc.ReplicationFactor = -1
	}
	cfg := topicConfigs(rf)
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: cfg[k]})
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := c.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err != nil {
		return false, fmt.Errorf("create checkpoint topic %s: %w", topic, err)
	}
	switch terr := res.Errors[topic]; {
	case terr == nil:
		return true, nil
	case errors.Is(terr, kafka.TopicAlreadyExists):
		return false, nil
	default:
		return false, fmt.Errorf("create checkpoint topic %s (1 partition, replication %d, %v): %w; create it beforehand, compacted, or grant CREATE on it",
			topic, tc.ReplicationFactor, cfg, terr)
	}
}

// checkCompacted refuses a topic whose cleanup.policy is not compact.
func (c *Cluster) checkCompacted(ctx context.Context, topic string) error {
	policy, err := c.topicPolicy(ctx, topic)
	if err != nil {
		return fmt.Errorf("read checkpoint topic's policy (grant DESCRIBE_CONFIGS on it): %w", err)
	}
	if policy != "compact" {
		return fmt.Errorf("%w: %s has cleanup.policy=%s, so retention may delete a slot's last checkpoint; set it to compact "+
			"(kafka-configs.sh --bootstrap-server BROKER --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)",
			checkpoint.ErrNotCompacted, topic, policy, topic)
	}
	return nil
}
