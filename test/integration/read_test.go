package integration

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

// Reading what the relay published.

// Reading what the relay published.

// consume waits until the topics hold at least want distinct events (by id
// header), then returns every message they hold, duplicates included.
func consume(t *testing.T, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	return consumeAt(t, broker.Brokers, topics, want, timeout)
}

// consumeAt is consume from another broker.
func consumeAt(t *testing.T, brokers string, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second}
	began := time.Now()
	var msgs []kafka.Message
	distinct := 0
	for {
		ends, total, err := harness.EndOffsets(ctx, client, topics)
		if err == nil && total >= int64(want) {
			msgs = readAllAt(ctx, t, brokers, ends)
			if distinct = countIDs(msgs); distinct >= want {
				t.Logf("consume: %d events present after %s", want, time.Since(began).Round(time.Millisecond))
				return msgs
			}
		}
		select {
		case <-ctx.Done():
			t.Errorf("topics %v hold %d distinct events after %s, want %d (last error: %v)", topics, distinct, timeout, want, err)
			return msgs
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func countIDs(msgs []kafka.Message) int {
	ids := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		id, _ := header(m, "id")
		ids[id] = true
	}
	return len(ids)
}

// readAll reads every message below the given end offsets.
func readAll(ctx context.Context, t *testing.T, ends map[string]map[int]int64) []kafka.Message {
	t.Helper()
	return readAllAt(ctx, t, broker.Brokers, ends)
}

// readAllAt is readAll from another broker.
func readAllAt(ctx context.Context, t *testing.T, brokers string, ends map[string]map[int]int64) []kafka.Message {
	t.Helper()
	if ctx.Err() != nil {
		return nil
	}
	var msgs []kafka.Message
	for topic, parts := range ends {
		for p, end := range parts {
			if end == 0 {
				continue
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, Topic: topic, Partition: p, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond})
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					r.Close()
					t.Fatalf("read %s/%d: %v", topic, p, err)
				}
				msgs = append(msgs, m)
				if m.Offset >= end-1 {
					break
				}
			}
			r.Close()
		}
	}
	return msgs
}

func header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// byID indexes messages by their id header and counts duplicates.
func byID(t *testing.T, msgs []kafka.Message) (first map[string]kafka.Message, dups int) {
	t.Helper()
	first = make(map[string]kafka.Message, len(msgs))
	for _, m := range msgs {
		id, ok := header(m, "id")
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
	return harness.EndOffsets(ctx, client, topics)
}
