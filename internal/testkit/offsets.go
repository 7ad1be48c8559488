package testkit

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// EndOffsets returns each partition's end offset for the topics, asking
// topic by topic, and their sum. A topic not yet created is an error.
func EndOffsets(ctx context.Context, client *kafka.Client, topics []string) (map[string]map[int]int64, int64, error) {
	ends := make(map[string]map[int]int64)
	var total int64
	for _, topic := range topics {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return nil, 0, err
		}
		if len(md.Topics) != 1 || md.Topics[0].Error != nil {
			return nil, 0, fmt.Errorf("topic %s not there yet", topic)
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
