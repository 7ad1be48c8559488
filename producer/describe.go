package producer

import (
	"context"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Description is what the brokers say of themselves and of the topics a
// relay writes to, read without writing anything: the facts sink.Check
// judges.
type Description struct {
	ClusterID string
	Brokers   int
	Topics    int // in the metadata answer, errors and all
	// Partitions and Replicas hold each existing topic's partition count
	// and replication factor (that of its first partition).
	Partitions, Replicas map[string]int
	// AutoCreate is the broker's auto.create.topics.enable; AutoCreateKnown
	// is false when the broker would not say (no DescribeConfigs
	// permission).
	AutoCreate, AutoCreateKnown bool
	// MinInSync holds min.insync.replicas of each topic asked about that
	// exists ("?" when the broker would not say).
	MinInSync map[string]string
}

// Describe asks the brokers for their metadata, the first broker's
// auto.create.topics.enable and min.insync.replicas of each of topics that
// exists. Its error is the metadata request's, as it is, for Hint.
func Describe(ctx context.Context, brokers []string, sec Security, topics []string) (Description, error) {
	transport := sec.Transport()
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: transport}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	md, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return Description{}, err
	}
	d := Description{ClusterID: md.ClusterID, Brokers: len(md.Brokers), Topics: len(md.Topics), Partitions: map[string]int{}, Replicas: map[string]int{},
		MinInSync: map[string]string{}}
	d.AutoCreate, d.AutoCreateKnown = autoCreateEnabled(ctx, client, md)
	for _, t := range md.Topics {
		if t.Error == nil {
			d.Partitions[t.Name] = len(t.Partitions)
			if len(t.Partitions) > 0 {
				d.Replicas[t.Name] = len(t.Partitions[0].Replicas)
			}
		}
	}
	for _, name := range topics {
		if _, ok := d.Partitions[name]; ok {
			d.MinInSync[name] = topicConfig(ctx, client, name, "min.insync.replicas")
		}
	}
	return d, nil
}

// topicConfig reads one config of topic ("?" when the broker would not say).
func topicConfig(ctx context.Context, client *kafka.Client, topic, name string) string {
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{name},
	}}})
	if err != nil || len(res.Resources) == 0 || res.Resources[0].Error != nil {
		return "?"
	}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigName == name {
			return e.ConfigValue
		}
	}
	return "?"
}

// autoCreateEnabled reads auto.create.topics.enable from a broker; known is
// false when the broker would not say (no DescribeConfigs permission).
func autoCreateEnabled(ctx context.Context, client *kafka.Client, md *kafka.MetadataResponse) (enabled, known bool) {
	id := md.Controller.ID
	if len(md.Brokers) > 0 {
		id = md.Brokers[0].ID
	}
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(id), ConfigNames: []string{"auto.create.topics.enable"},
	}}})
	if err != nil || len(res.Resources) == 0 || res.Resources[0].Error != nil {
		return false, false
	}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigName == "auto.create.topics.enable" {
			return e.ConfigValue == "true", true
		}
	}
	return false, false
}
