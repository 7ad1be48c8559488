package testkit

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// EndOffsets returns each partition's end offset for the topics, asking
// topic by topic, and their sum. A topic not yet created is an error.
func EndOffsets(ctx context.Context, client *kafka.Client, topics []string) (map[string]map[int]int64, int64, error) {
	ends := make(map[string]map[int]int64)
	var total int64
	for _, topic := range topics {
		md, err := partitioned(ctx, client, topic)
		if err != nil {
			return nil, 0, err
		}
		req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
		for _, p := range md.Topics[0].Partitions {
			req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p.ID))
		}
		res, err := client.ListOffsets(ctx, req)
		if err != nil {
			return nil, 0, err
		}
		ends[topic] = make(map[int]int64)
		for _, p := range res.Topics[topic] {
			if p.Error != nil {
				return nil, 0, fmt.Errorf("offsets of %s/%d: %w", topic, p.Partition, p.Error)
			}
			ends[topic][p.Partition] = p.LastOffset
			total += p.LastOffset
		}
		if len(ends[topic]) != len(md.Topics[0].Partitions) {
			return nil, 0, fmt.Errorf("offsets of %s: %d partitions answered of %d", topic, len(ends[topic]), len(md.Topics[0].Partitions))
		}
	}
	return ends, total, nil
}

// partitioned returns topic's metadata once it lists partitions: a topic
// just created can be answered for a moment without them, even after a
// consumer read from it, and end offsets summed then would leave them out.
func partitioned(ctx context.Context, client *kafka.Client, topic string) (*kafka.MetadataResponse, error) {
	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return nil, err
		}
		if len(md.Topics) != 1 || md.Topics[0].Error != nil {
			return nil, fmt.Errorf("topic %s not there yet", topic)
		}
		if len(md.Topics[0].Partitions) > 0 {
			return md, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s: no partitions in its metadata: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
