package testkit

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Delivery is the relay's --delivery the tests run with: OUTBOX_TEST_DELIVERY,
// at-least-once when unset. `make test-exactly` runs the integration suite
// with exactly-once: every Outbox's relay then writes Kafka transactions,
// and what the tests read is read at read_committed.
func Delivery() string {
	if d := os.Getenv("OUTBOX_TEST_DELIVERY"); d != "" {
		return d
	}
	return "at-least-once"
}

// exactlyOnce reports whether the tests run with exactly-once delivery.
func exactlyOnce() bool { return Delivery() == "exactly-once" }

// readCommitted reads the partitions of ends from their start at
// read_committed (franz-go, which drops aborted records and transaction
// markers, as the Java consumer does) until every partition has given a
// record at or past its end less one, or none comes for a second: a
// transaction still open past the end holds its records back.
func readCommitted(ctx context.Context, t testing.TB, brokers string, ends map[string]map[int]int64) []kafka.Message {
	t.Helper()
	parts := map[string]map[int32]kgo.Offset{}
	left := map[string]map[int32]int64{}
	for topic, ps := range ends {
		for p, end := range ps {
			if end == 0 {
				continue
			}
			if parts[topic] == nil {
				parts[topic], left[topic] = map[int32]kgo.Offset{}, map[int32]int64{}
			}
			parts[topic][int32(p)] = kgo.NewOffset().AtStart()
			left[topic][int32(p)] = end
		}
	}
	if len(parts) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("read at read_committed: %v", err)
	}
	defer cl.Close()
	var msgs []kafka.Message
	for len(left) > 0 && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			msgs = append(msgs, fromKgo(r))
			if end, ok := left[r.Topic][r.Partition]; ok && r.Offset >= end-1 {
				delete(left[r.Topic], r.Partition)
				if len(left[r.Topic]) == 0 {
					delete(left, r.Topic)
				}
			}
		})
		if n == 0 {
			break
		}
	}
	return msgs
}

// fromKgo is r as kafka-go's message.
func fromKgo(r *kgo.Record) kafka.Message {
	m := kafka.Message{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, Key: r.Key, Value: r.Value, Time: r.Timestamp}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	return m
}

// ConsumeCommitted reads topics from their start at read_committed, as
// consumers of exactly-once topics must, until they have given want
// distinct events (by their id header) and then nothing more for 2 s, or
// 5 s more have passed (a load may still be running). It returns every
// record read, duplicates included; if want is not reached within
// timeout, the test fails (t.Errorf) and what was read is returned.
func ConsumeCommitted(t testing.TB, brokers string, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	began, last := time.Now(), time.Now()
	var reached time.Time
	var msgs []kafka.Message
	ids := map[string]bool{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			m := fromKgo(r)
			id, _ := Header(m, "id")
			msgs, ids[id], last = append(msgs, m), true, time.Now()
		})
		switch {
		case reached.IsZero() && len(ids) >= want:
			reached = time.Now()
		case !reached.IsZero() && (time.Since(last) > 2*time.Second || time.Since(reached) > 5*time.Second):
			return msgs
		case reached.IsZero() && time.Since(began) > timeout:
			t.Errorf("topics %v hold %d distinct committed events after %s, want %d", topics, len(ids), timeout, want)
			return msgs
		}
	}
}
