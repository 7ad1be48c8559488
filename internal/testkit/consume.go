package testkit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// Consume waits until topics, on brokers (comma-separated), hold at least
// want distinct events (by their id header), then returns every message
// they hold, duplicates included. If they do not within timeout, the test
// fails (t.Errorf) and what was read is returned, for the caller to say
// what is missing.
func Consume(t testing.TB, brokers string, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	began := time.Now()
	var msgs []kafka.Message
	distinct := 0
	for {
		ends, total, err := EndOffsets(ctx, client, topics)
		if err == nil && total >= int64(want) {
			msgs = ReadAll(ctx, t, brokers, ends)
			if distinct = Distinct(msgs); distinct >= want {
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

// ReadAll reads every message below the given end offsets (EndOffsets'),
// from brokers (comma-separated); a read that fails fails the test.
func ReadAll(ctx context.Context, t testing.TB, brokers string, ends map[string]map[int]int64) []kafka.Message {
	t.Helper()
	if ctx.Err() != nil {
		return nil
	}
	if exactlyOnce() {
		return readCommitted(ctx, t, brokers, ends)
	}
	var msgs []kafka.Message
	for topic, parts := range ends {
		for p, end := range parts {
			if end == 0 {
				continue
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(brokers, ","), Topic: topic, Partition: p, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond})
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

// Header returns the value of m's header key, and whether m has it.
func Header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// Distinct counts the distinct events among msgs, by their id header:
// at-least-once delivery may repeat one.
func Distinct(msgs []kafka.Message) int {
	ids := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		id, _ := Header(m, "id")
		ids[id] = true
	}
	return len(ids)
}
