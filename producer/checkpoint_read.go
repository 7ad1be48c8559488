package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
)

// The size of a fetch: the first asks for fetchMaxBytes of the partition
// (the Java consumer's max.partition.fetch.bytes is 1 MiB), and each next
// one for twice the last, up to fetchMaxBytesLimit, one segment of a topic
// EnsureCheckpointTopic creates. The whole response's bound, fetchResponseMaxBytes,
// is the Java consumer's fetch.max.bytes: with one partition per request
// it never binds first, which matters with kfake, whose fetch leaves a
// partition's aborted transactions out of a response cut short by that
// bound (real brokers list them either way).
const (
	fetchMaxBytes         = 64 << 10
	fetchMaxBytesLimit    = segmentBytes
	fetchResponseMaxBytes = 50 << 20
)

// fetchWait is how long one fetch waits on the broker for data to become
// stable, while transactions open when the read began are still open.
const fetchWait = 500 * time.Millisecond

// ReadCheckpoint returns the newest committed checkpoint stored under key
// in topic, and whether there is one. It reads the key's partition (see
// checkpointPartition) back from its high watermark as of the call, in windows each
// twice the last (see readWindow), down to its log start at most,
// isolation read_committed, waiting while a transaction that wrote below
// that mark is still open (at most until the broker aborts it after its
// transaction timeout, or until ctx ends): a checkpoint committed after
// another slot's open transaction is thus not missed. Records of aborted
// transactions are dropped here, as the Java consumer drops them: the
// broker returns them, with the list of aborted transactions, even at
// read_committed (see fetch).
//
// The caller must have fenced the slot's earlier instances first
// (InitProducerId with the slot's transactional id), so that no checkpoint
// of this key is committed after the read, and should bound ctx: a
// transaction left open by a frozen producer holds the read until the
// broker aborts it (transaction.timeout.ms).
//
// A topic that does not exist, a partition without a record under key, and
// a tombstone (a null value, which an operator writes to reset the slot's
// checkpoint) are no checkpoint: the relay then trusts the slot, whose
// position is never past the last Kafka commit, so the worst outcome is
// events sent again. A record under key that cannot be decoded is an error
// (checkpoint.ErrBadRecord, checkpoint.ErrUnsupportedVersion), not a missing checkpoint.
func (c *Cluster) ReadCheckpoint(ctx context.Context, topic, key string) (checkpoint.Record, bool, error) {
	return c.readCheckpoint(ctx, topic, key, fetchMaxBytes)
}

func (c *Cluster) readCheckpoint(ctx context.Context, topic, key string, maxBytes int32) (checkpoint.Record, bool, error) {
	exists, partitions, err := c.describeTopic(ctx, topic)
	if err != nil || !exists || partitions == 0 {
		return checkpoint.Record{}, false, err
	}
	p := checkpointPartition(key, partitions)
	first, end, err := c.bounds(ctx, topic, p)
	if err != nil {
		return checkpoint.Record{}, false, err
	}
	rd := &reader{client: c.client, topic: topic, partition: p, key: []byte(key), maxBytes: maxBytes}
	// Window by window from the end back, each twice the last, until one
	// holds a record under the key: its last is the newest.
	for hi, window := end, int64(readWindow); hi > first && !rd.seen; window *= 2 {
		lo := max(first, hi-window)
		rd.end = hi
		if err := rd.readFrom(ctx, lo); err != nil {
			return checkpoint.Record{}, false, err
		}
		hi = lo
	}
	if rd.last == nil {
		return checkpoint.Record{}, false, nil
	}
	r, err := checkpoint.Decode(rd.last)
	if err != nil {
		return checkpoint.Record{}, false, fmt.Errorf("read checkpoint of %s from %s/%d: %w", key, topic, p, err)
	}
	return r, true, nil
}

// readWindow is the first window readCheckpoint reads, in offsets from the end of
// the partition back; each next window is twice the last, and each fetch
// asks for twice the bytes of the last (up to fetchMaxBytesLimit). A slot's
// last checkpoint is usually among the last records (each slot's commit
// takes two offsets: its record and the commit marker), and one fetch of
// 64 KiB finds it. An idle slot's is behind its neighbours' commits, all
// in the one partition of the shared topic: 75,000 offsets of them for a
// neighbour committing every 25 ms until the log cleaner compacts them.
// Windows of a fixed 64 offsets took a fetch each, 1,172 fetches for those
// 75,000, past the 20 s a relay's open has at 10 ms a round trip; doubling
// windows and fetches take about log2(n/64) fetches for n offsets, plus one
// per 16 MiB of the tail past the first few: 11 for those 75,000, 13 for
// 200,000 (TestReadCheckpointBehindABusyNeighbour). Memory stays at one batch
// whatever a fetch's size, since fetch decodes the response as it arrives.
//
// Kafka reads forward only: without an index of where each key's last
// record is, finding it costs reading the bytes after it, so no layout of
// this topic bounds the bytes read by a neighbour's writes. A partition
// per slot by key hash was not taken: it bounds nothing when two slots
// hash to one partition, and an existing topic keeps its one partition
// (EnsureCheckpointTopic never changes a topic; adding partitions moves keys, and
// each slot's checkpoint with them: events sent again). Doubling changes
// nothing stored, and works on every topic as it is.
const readWindow = 64

// readFrom reads the key's records from offset to rd.end.
func (rd *reader) readFrom(ctx context.Context, offset int64) error {
	for offset < rd.end {
		next, err := rd.fetchOnce(ctx, offset)
		if cause := ended(ctx); cause != nil { // the fetch's own error is a timeout on the socket
			return fmt.Errorf("read checkpoint of %s from %s/%d: at offset %d of %d (last stable offset %d): %w",
				rd.key, rd.topic, rd.partition, offset, rd.end, rd.lso, cause)
		}
		if err != nil {
			return fmt.Errorf("read checkpoint of %s from %s/%d at offset %d: %w", rd.key, rd.topic, rd.partition, offset, err)
		}
		if next == offset { // an open transaction holds the rest: wait for its end
			select {
			case <-ctx.Done():
			case <-time.After(fetchWait / 10):
			}
		}
		offset = next
	}
	return nil
}

// ended returns why ctx ended, or nil. A deadline counts from the moment it
// passes: the socket's read deadline, set from it, may expire before ctx
// says so.
func ended(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// bounds returns partition p's log start offset and high watermark, or an
// error when the answer leaves p out (see Offsets): never offsets of 0
// that would read as no checkpoint.
func (c *Cluster) bounds(ctx context.Context, topic string, p int) (first, end int64, err error) {
	offsets, err := c.Offsets(ctx, topic, []int32{int32(p)})
	if err != nil {
		return 0, 0, err
	}
	return offsets[int32(p)].First, offsets[int32(p)].End, nil
}

// reader reads one key's records from one partition, across fetches.
type reader struct {
	client    *kafka.Client
	topic     string
	partition int
	key       []byte
	end       int64  // records at or past it are not read
	maxBytes  int32  // the next fetch's size
	last      []byte // the newest value under key so far; nil for none or a tombstone
	seen      bool   // a committed record under key was read (a tombstone too)
	lso       int64  // the last stable offset, as of the latest fetch
}

// fetchOnce sends one read_committed fetch at offset and keeps the value of
// each committed data record under the key from offset to end. It returns
// the offset to fetch next, which is offset itself when nothing is stable
// there yet, and doubles the next fetch's size.
func (rd *reader) fetchOnce(ctx context.Context, offset int64) (int64, error) {
	want := &scan{key: rd.key, from: offset, end: rd.end}
	res, err := fetch(ctx, rd.client, rd.topic, rd.partition, offset, rd.maxBytes, want)
	if err != nil {
		return 0, err
	}
	rd.maxBytes = int32(min(2*int64(rd.maxBytes), fetchMaxBytesLimit))
	rd.lso = res.lso
	if res.batches == 0 {
		// Nothing stable at offset yet: an open transaction's records
		// follow (the batches between may have been compacted away).
		return offset, nil
	}
	if res.seen {
		rd.last, rd.seen = res.last, true
	}
	return max(res.next, offset+1), nil
}
