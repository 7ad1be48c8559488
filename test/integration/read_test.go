package integration

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// Reading what the relay published (consume, in helpers_test.go, waits for it).

// byID indexes messages by their id header and counts duplicates.
func byID(t *testing.T, msgs []kafka.Message) (first map[string]kafka.Message, dups int) {
	t.Helper()
	first = make(map[string]kafka.Message, len(msgs))
	for _, m := range msgs {
		id, ok := testkit.Header(m, "id")
		if !ok {
			t.Fatalf("message at %s/%d@%d has no id header", m.Topic, m.Partition, m.Offset)
		}
		if _, seen := first[id]; seen {
			dups++
			continue
		}
		first[id] = m
	}
	return first, dups
}

// sortedByOffset orders one partition's messages as a consumer reads them.
func sortedByOffset(msgs []kafka.Message) []kafka.Message {
	out := append([]kafka.Message(nil), msgs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// endOffsets returns the end offsets of topics and their sum.
func endOffsets(topics ...string) (map[string]map[int]int64, int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return testkit.EndOffsets(ctx, client, topics)
}
