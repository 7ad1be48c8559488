package dlq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/kwire"
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

// transport's connections are guarded (kwire.Dial, which does the TLS): a
// broker's malformed answer fails the request instead of crashing the
// process.
func (c Config) transport() *kafka.Transport {
	return &kafka.Transport{Dial: kwire.Dial(nil, c.Security.TLS), SASL: c.Security.SASL, ClientID: "outbox-cdc-dlq",
		DialTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MetadataTTL: 6 * time.Second}
}

func (c Config) client(t *kafka.Transport) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: t, Timeout: 30 * time.Second}
}

// List returns the selected dead letters, in partition and offset order,
// without their values. It reads the topic up to its end when called.
func List(ctx context.Context, cfg Config, sel Selection) ([]Entry, error) {
	var out []Entry
	err := scan(ctx, cfg.client(cfg.transport()), cfg.Topic, sel, false, func(es []Entry) error {
		out = append(out, es...)
		return nil
	})
	return out, err
}

// scan hands fn the selected dead letters of topic, a fetch at a time: each
// partition in turn, each in offset order, up to the end offsets it found
// when it began.
func scan(ctx context.Context, client *kafka.Client, topic string, sel Selection, keepValues bool, fn func([]Entry) error) error {
	firsts, err := offsets(ctx, client, topic, kafka.FirstOffset)
	if err != nil {
		return err
	}
	ends, err := offsets(ctx, client, topic, kafka.LastOffset)
	if err != nil {
		return err
	}
	parts := make([]int32, 0, len(ends))
	for p := range ends {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for p := range sel.Partitions {
		if _, ok := ends[p]; !ok {
			return fmt.Errorf("dead-letter topic %s has no partition %d (it has %d)", topic, p, len(ends))
		}
	}
	for _, p := range parts {
		r, ok := sel.rangeOf(p)
		if !ok {
			continue
		}
		stop := ends[p]
		if r.To >= 0 && r.To+1 < stop {
			stop = r.To + 1
		}
		if err := scanPartition(ctx, client, topic, p, max(r.From, firsts[p]), stop, sel, keepValues, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanPartition reads partition p from offset from up to stop (exclusive).
func scanPartition(ctx context.Context, client *kafka.Client, topic string, p int32, from, stop int64, sel Selection, keepValues bool, fn func([]Entry) error) error {
	for off := from; off < stop; {
		res, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: int(p), Offset: off,
			MinBytes: 1, MaxBytes: fetchBytes, MaxWait: 500 * time.Millisecond})
		if err == nil {
			err = res.Error
		}
		if err != nil {
			return fmt.Errorf("read %s/%d at offset %d: %w", topic, p, off, err)
		}
		var es []Entry
		next := off
		for {
			rec, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read %s/%d at offset %d: %w", topic, p, next, err)
			}
			if rec.Offset < off { // a batch may begin before the offset asked for
				continue
			}
			if rec.Offset >= stop {
				break
			}
			next = rec.Offset + 1
			e, err := entryOf(p, rec, keepValues)
			if err != nil {
				return err
			}
			if sel.matches(e.Reason) {
				es = append(es, e)
			}
		}
		if next == off {
			return nil // only offsets without records remain (compaction, transaction markers)
		}
		if err := fn(es); err != nil {
			return err
		}
		off = next
	}
	return nil
}

// offsets returns the first or end (at) offset of each partition of topic.
func offsets(ctx context.Context, client *kafka.Client, topic string, at int64) (map[int32]int64, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of dead-letter topic %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		var why error = errors.New("not in the broker's answer")
		if len(md.Topics) == 1 {
			why = md.Topics[0].Error
		}
		return nil, fmt.Errorf("dead-letter topic %s: %w", topic, why)
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, p := range md.Topics[0].Partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.OffsetRequest{Partition: p.ID, Timestamp: at})
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("offsets of dead-letter topic %s: %w", topic, err)
	}
	out := make(map[int32]int64, len(md.Topics[0].Partitions))
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", topic, p.Partition, p.Error)
		}
		if at == kafka.FirstOffset {
			out[int32(p.Partition)] = p.FirstOffset
		} else {
			out[int32(p.Partition)] = p.LastOffset
		}
	}
	if len(out) != len(md.Topics[0].Partitions) {
		return nil, fmt.Errorf("offsets of %s: %d partitions answered of %d", topic, len(out), len(md.Topics[0].Partitions))
	}
	return out, nil
}
