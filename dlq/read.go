package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// Config says where the dead-letter topic is and how to reach its brokers.
type Config struct {
	Brokers   []string
	Security  sink.Security
	Topic     string // the dead-letter topic (--dlq-topic)
	Admission sink.Admission
}

// fetchBytes bounds one fetch: a replay holds at most this much (or one
// larger record) in memory at a time.
const fetchBytes = 4 << 20

// connect returns a Cluster of the brokers, its requests bounded by 30 s,
// naming itself outbox-cdc-dlq to them. Its connections are guarded
// (internal/kwire): a broker's malformed answer fails the request instead
// of crashing the process.
func (c Config) connect() *producer.Cluster {
	return producer.ConnectAs(c.Security, c.Brokers, 30*time.Second, "outbox-cdc-dlq")
}

// List returns the selected dead letters, in partition and offset order,
// without their values. It reads the topic up to its end when called.
func List(ctx context.Context, cfg Config, sel Selection) ([]Entry, error) {
	cluster := cfg.connect()
	defer cluster.Close()
	var out []Entry
	err := scan(ctx, cluster, cfg.Topic, sel, false, func(es []Entry) error {
		out = append(out, es...)
		return nil
	})
	return out, err
}

// scan hands fn the selected dead letters of topic, a fetch at a time: each
// partition in turn, each in offset order, up to the end offsets it found
// when it began.
func scan(ctx context.Context, cluster *producer.Cluster, topic string, sel Selection, keepValues bool, fn func([]Entry) error) error {
	offsets, err := offsetsOf(ctx, cluster, topic)
	if err != nil {
		return err
	}
	parts := slices.Sorted(maps.Keys(offsets))
	for p := range sel.Partitions {
		if _, ok := offsets[p]; !ok {
			return fmt.Errorf("dead-letter topic %s has no partition %d (it has %d)", topic, p, len(offsets))
		}
	}
	for _, p := range parts {
		r, ok := sel.rangeOf(p)
		if !ok {
			continue
		}
		stop := offsets[p].End
		if r.To >= 0 && r.To+1 < stop {
			stop = r.To + 1
		}
		if err := scanPartition(ctx, cluster, topic, p, max(r.From, offsets[p].First), stop, sel, keepValues, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanPartition reads partition p from offset from up to stop (exclusive).
func scanPartition(ctx context.Context, cluster *producer.Cluster, topic string, p int32, from, stop int64, sel Selection, keepValues bool, fn func([]Entry) error) error {
	for off := from; off < stop; {
		msgs, next, err := cluster.ReadTopic(ctx, topic, p, off, stop, fetchBytes)
		if err != nil {
			return err
		}
		if next <= off {
			return nil // only offsets without records remain (compaction, transaction markers)
		}
		var es []Entry
		for _, m := range msgs {
			if e := entryOf(m, keepValues); sel.matches(e.Reason) {
				es = append(es, e)
			}
		}
		if err := fn(es); err != nil {
			return err
		}
		off = next
	}
	return nil
}

// offsetsOf returns the first and end offsets of each partition of topic.
func offsetsOf(ctx context.Context, cluster *producer.Cluster, topic string) (map[int32]producer.Offsets, error) {
	parts, err := cluster.Partitions(ctx, topic)
	var te *producer.TopicError
	switch {
	case errors.As(err, &te):
		return nil, fmt.Errorf("dead-letter topic %s: %w", topic, te.Err)
	case err != nil:
		return nil, fmt.Errorf("dead-letter topic: %w", err) // err names the topic
	}
	offsets, err := cluster.Offsets(ctx, topic, parts)
	if err != nil {
		return nil, fmt.Errorf("dead-letter topic: %w", err)
	}
	return offsets, nil
}
