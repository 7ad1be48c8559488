package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// TopicSpec is how the relay creates a topic that does not exist, through
// the admin API (CreateTopics): production clusters turn the brokers'
// auto-creation off and want each topic's partitions, replication and
// configs chosen. Zero Partitions or ReplicationFactor take the broker's
// defaults (num.partitions, default.replication.factor).
type TopicSpec struct {
	Partitions        int
	ReplicationFactor int
	Configs           map[string]string // min.insync.replicas=2, cleanup.policy=…, retention.ms=…
}

func (s TopicSpec) String() string {
	part := func(n int) string {
		if n <= 0 {
			return "the broker's default"
		}
		return fmt.Sprint(n)
	}
	var cfgs []string
	for _, k := range slices.Sorted(maps.Keys(s.Configs)) {
		cfgs = append(cfgs, k+"="+s.Configs[k])
	}
	out := fmt.Sprintf("partitions %s, replication factor %s", part(s.Partitions), part(s.ReplicationFactor))
	if len(cfgs) > 0 {
		out += ", " + strings.Join(cfgs, ", ")
	}
	return out
}

// ReasonTopicNotCreated is a topic the broker refused to create: no
// permission, a replication factor above the brokers, a bad config.
const ReasonTopicNotCreated = "topic_not_created"

// CreateTopic creates topic as spec says. One that exists already (another
// relay raced this one to it) is no failure. A refusal is an *Error with
// ReasonTopicNotCreated, naming the topic and what to fix; a failure that
// may pass (the controller moving, the network) is returned as it is.
func CreateTopic(ctx context.Context, client *kafka.Client, topic string, spec TopicSpec) error {
	tc := kafka.TopicConfig{Topic: topic, NumPartitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor}
	if tc.NumPartitions <= 0 {
		tc.NumPartitions = -1
	}
	if tc.ReplicationFactor <= 0 {
		tc.ReplicationFactor = -1
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Configs)) {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: spec.Configs[k]})
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	terr := res.Errors[topic]
	var kerr kafka.Error
	switch {
	case terr == nil, errors.Is(terr, kafka.TopicAlreadyExists):
		return nil
	case errors.As(terr, &kerr) && kerr.Temporary():
		return fmt.Errorf("create topic %s: %w", topic, terr)
	}
	return &Error{Topic: topic, Reason: ReasonTopicNotCreated,
		Err: fmt.Errorf("kafka refused to create topic %s (%s): %w; %s", topic, spec, terr, createHint(terr))}
}

// createHint says what to fix when a topic cannot be created.
func createHint(err error) string {
	switch {
	case errors.Is(err, kafka.InvalidReplicationFactor):
		return "lower --topic-replication-factor to at most the number of brokers"
	case errors.Is(err, kafka.InvalidPartitionNumber):
		return "check --topic-partitions"
	case errors.Is(err, kafka.InvalidConfiguration), errors.Is(err, kafka.InvalidRequest):
		return "check each --topic-config KEY=VALUE against the broker's topic configs"
	case errors.Is(err, kafka.TopicAuthorizationFailed), errors.Is(err, kafka.ClusterAuthorizationFailed):
		return "grant the relay's principal CREATE on the topic (or the cluster), or create the topic beforehand (outbox-cdc setup --kafka-brokers … does)"
	case errors.Is(err, kafka.PolicyViolation):
		return "the cluster's create-topic policy refused these settings"
	case errors.Is(err, kafka.InvalidTopic):
		return "the name is not one Kafka accepts"
	}
	return "create the topic beforehand, or fix the --topic-* settings"
}

// EnsureTopic creates topic as spec says unless it exists: the dead-letter
// topic at start, and the fixed topics `setup` provisions. It reports
// whether it created it.
func EnsureTopic(ctx context.Context, brokers []string, sec Security, topic string, spec TopicSpec) (bool, error) {
	transport := sec.Transport()
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second, Transport: transport}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return false, fmt.Errorf("kafka metadata of %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name == topic && t.Error == nil {
			return false, nil
		}
	}
	if err := CreateTopic(ctx, client, topic, spec); err != nil {
		return false, err
	}
	return true, nil
}
