package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/listoffsets"

	"github.com/outbox-cdc/outbox-cdc/internal/kwire"
)

// Message is a record of a topic with where it sits: as read (ReadTopic),
// or to be published (Publisher). (Record is a record of a batch being
// encoded, without its place.)
type Message struct {
	Topic     string
	Partition int32 // read: its partition; published: where it goes, or ByKey
	Offset    int64 // read only
	Time      time.Time
	Key       []byte // nil: a null key
	Value     []byte // nil: a null value
	Headers   []Header
}

// Header is a record header; its meaning is the caller's. It is
// kafka-go's own type, so that records built outside the producer room
// (sink's envelopes and dead letters) reach the wire without a copy.
type Header = kafka.Header

// ByKey, as a published Message's Partition, places it by its key as the
// relay does (murmur2, as the Java client).
const ByKey int32 = -1

// ErrUnknownTopic is a TopicError's Err for a topic the brokers do not
// know. It is the broker's own error (UNKNOWN_TOPIC_OR_PARTITION), so its
// text is the broker's.
var ErrUnknownTopic error = kafka.UnknownTopicOrPartition

// ErrNotInAnswer is a TopicError's Err for a topic the brokers' metadata
// answer left out.
var ErrNotInAnswer = errors.New("not in the broker's answer")

// TopicError is the brokers' answer about a topic, not a failure to ask
// them: it does not exist (ErrUnknownTopic), the principal may not
// describe it, and so on.
type TopicError struct {
	Topic string
	Err   error
}

func (e *TopicError) Error() string { return "topic " + e.Topic + ": " + e.Err.Error() }

func (e *TopicError) Unwrap() error { return e.Err }

// Partitions returns the ids of topic's partitions, as the brokers'
// metadata (cached by the transport for a few seconds) has them. A
// *TopicError is the brokers' answer about the topic; any other error a
// failure to ask, or an answer whose ids are not 0 to n-1 each once (a
// topic's partitions are): a partition named twice would be read twice,
// one left out skipped.
func (c *Cluster) Partitions(ctx context.Context, topic string) ([]int32, error) {
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Name != topic {
		return nil, &TopicError{Topic: topic, Err: ErrNotInAnswer}
	}
	if err := md.Topics[0].Error; err != nil {
		return nil, &TopicError{Topic: topic, Err: err}
	}
	parts := md.Topics[0].Partitions
	ids, seen := make([]int32, len(parts)), make([]bool, len(parts))
	for i, p := range parts {
		if p.ID < 0 || p.ID >= len(parts) || seen[p.ID] {
			return nil, fmt.Errorf("metadata of %s: partition %s/%d in an answer of %d partitions, or twice", topic, topic, p.ID, len(parts))
		}
		ids[i], seen[p.ID] = int32(p.ID), true
	}
	return ids, nil
}

// Offsets are a partition's log start offset and its high watermark (one
// past its last record).
type Offsets struct {
	First, End int64
}

// Offsets returns the offsets of topic's partitions, in two requests (one
// for the log starts, one for the ends) whatever their number. Each
// partition asked for has its offsets, or it is an error naming it: a read
// of the topic never skips a partition the brokers failed to answer for.
func (c *Cluster) Offsets(ctx context.Context, topic string, partitions []int32) (map[int32]Offsets, error) {
	firsts, err := c.offsetsAt(ctx, topic, partitions, kafka.FirstOffset)
	if err != nil {
		return nil, err
	}
	ends, err := c.offsetsAt(ctx, topic, partitions, kafka.LastOffset)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]Offsets, len(firsts))
	for p, first := range firsts {
		if end := ends[p]; first < 0 || end < first {
			return nil, fmt.Errorf("offsets of %s/%d: log start %d, end %d", topic, p, first, end)
		}
		out[p] = Offsets{First: firsts[p], End: ends[p]}
	}
	return out, nil
}

// offsetsAt returns the offset at (kafka.FirstOffset or LastOffset) of each
// partition asked for. It reads the answer itself, not through kafka-go's
// Client.ListOffsets, which fills a partition left out of the answer with
// offset 0 and files one never asked for under partition 0. An answer's
// row of another topic, or of a partition not asked for, is left out; a
// partition answered twice, or not at all, is an error naming it.
func (c *Cluster) offsetsAt(ctx context.Context, topic string, partitions []int32, at int64) (map[int32]int64, error) {
	asked := make(map[int32]bool, len(partitions))
	req := &listoffsets.Request{ReplicaID: -1, Topics: []listoffsets.RequestTopic{{Topic: topic}}}
	for _, p := range partitions {
		if !asked[p] {
			asked[p] = true
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, listoffsets.RequestPartition{Partition: p, CurrentLeaderEpoch: -1, Timestamp: at})
		}
	}
	m, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("offsets of %s: %w", topic, err)
	}
	res, ok := m.(*listoffsets.Response)
	if !ok {
		return nil, fmt.Errorf("offsets of %s: unexpected answer %T", topic, m)
	}
	got, twice := make(map[int32]int64, len(asked)), map[int32]bool{}
	for _, t := range res.Topics {
		for _, po := range t.Partitions {
			if t.Topic != topic || !asked[po.Partition] {
				continue
			}
			if po.ErrorCode != 0 {
				return nil, fmt.Errorf("offsets of %s/%d: %w", topic, po.Partition, kafka.Error(po.ErrorCode))
			}
			_, twice[po.Partition] = got[po.Partition]
			got[po.Partition] = po.Offset
		}
	}
	// A partition answered twice is most often another's answer: name the
	// one left out first.
	for _, p := range slices.Sorted(maps.Keys(asked)) {
		if _, ok := got[p]; !ok {
			return nil, fmt.Errorf("offsets of %s/%d: not in the broker's answer", topic, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(twice)) {
		if twice[p] {
			return nil, fmt.Errorf("offsets of %s/%d: answered twice", topic, p)
		}
	}
	return got, nil
}

// A topic read's bounds on what a compressed batch inflates to: one record
// no larger than an answer may be (kwire.MaxFrame), a batch no more than
// what kwire lets all the batches of one answer inflate to.
var topicLimits = limits{record: kwire.MaxFrame, batch: 2 * kwire.MaxFrame}

// ReadTopic reads partition p of topic from offset from, in one fetch of
// about maxBytes, read_uncommitted (records of open and aborted
// transactions included, transaction markers left out): the records from
// from up to end (exclusive), in offset order, and the offset to read from
// next. It keeps at most maxBytes of records (keys, values, headers and
// what holding them costs: see messageCost), but always the first,
// whatever the broker sends: memory stays within maxBytes and one record. next is from when the broker had nothing at from (the
// end of the partition); it may pass records that compaction removed or
// that are transaction markers, so fewer records than next-from are no gap.
// A malformed answer, or a compressed record or batch inflating past
// topicLimits, is an error, never a panic or an allocation of what it
// claims.
func (c *Cluster) ReadTopic(ctx context.Context, topic string, p int32, from, end int64, maxBytes int32) ([]Message, int64, error) {
	if maxBytes <= 0 {
		return nil, 0, fmt.Errorf("read %s/%d: a fetch of %d bytes", topic, p, maxBytes)
	}
	want := &scan{from: from, end: end, whole: true, keep: int64(maxBytes), limits: topicLimits}
	res, err := fetch(ctx, c.client, topic, int(p), from, maxBytes, want)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s/%d at offset %d: %w", topic, p, from, err)
	}
	for i := range res.records {
		res.records[i].Topic, res.records[i].Partition = topic, p
	}
	if res.batches == 0 {
		return res.records, from, nil
	}
	return res.records, max(res.next, from), nil
}

// What a kept record costs in memory beyond its bytes: its Message, and
// each of its headers' Header. A read counts them against its bytes, so
// that a broker's many tiny records or headers cannot make it hold many
// times what it asked for.
const (
	messageCost = 128
	headerCost  = 48
)

// keepRecord keeps r, a record of the batch b (from its partition leader
// epoch on), unless the read kept all it may: then it stops the read at r.
// A record that alone costs more than limits.record is an error.
func (s *scan) keepRecord(r rawRecord, b []byte) error {
	headers, _ := binary.Varint(r.headers) // a count the bytes cannot hold fails readHeaders
	cost := int64(len(r.key)+len(r.value)+len(r.headers)) + messageCost + max(min(headers, int64(len(r.headers))), 0)*headerCost
	if cost > s.limits.record {
		return fmt.Errorf("the record at %d costs %d bytes to hold (%d headers), over the %d a record read here may", r.offset, cost, headers, s.limits.record)
	}
	if len(s.out.records) > 0 && s.out.kept+cost > s.keep {
		s.out.full, s.out.next = true, r.offset
		return nil
	}
	hs, err := readHeaders(r.headers)
	if err != nil {
		return fmt.Errorf("headers of the record at %d: %w", r.offset, err)
	}
	first := int64(binary.BigEndian.Uint64(b[15:23])) // the batch's first timestamp
	s.out.records = append(s.out.records, Message{Offset: r.offset, Time: time.UnixMilli(first + r.timestampDelta),
		Key: bytes.Clone(r.key), Value: bytes.Clone(r.value), Headers: hs})
	s.out.kept += cost
	return nil
}

// readHeaders reads a record's headers: their count, then each key and
// value (a null value is nil). A count the bytes cannot hold is an error,
// not an allocation.
func readHeaders(b []byte) ([]Header, error) {
	f := fields{b: b}
	n := f.varint()
	if f.err != nil || n <= 0 {
		return nil, f.err
	}
	if n > int64(len(f.b))/2 { // a header takes 2 bytes at least
		return nil, fmt.Errorf("%d headers in %d bytes: %w", n, len(f.b), errTruncated)
	}
	hs := make([]Header, n)
	for i := range hs {
		k, v := f.bytes(), f.bytes()
		hs[i] = Header{Key: string(k), Value: bytes.Clone(v)}
	}
	return hs, f.err
}
