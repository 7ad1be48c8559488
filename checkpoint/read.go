package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// fetchMaxBytes bounds what one fetch returns of the partition (the Java
// consumer's max.partition.fetch.bytes): a few thousand checkpoints. The
// whole response's bound, fetchResponseMaxBytes, is the Java consumer's
// fetch.max.bytes: with one partition per request it never binds first,
// which matters with kfake, whose fetch leaves a partition's aborted
// transactions out of a response cut short by that bound (real brokers
// list them either way).
const (
	fetchMaxBytes         = 64 << 10
	fetchResponseMaxBytes = 50 << 20
)

// fetchWait is how long one fetch waits on the broker for data to become
// stable, while transactions open when the read began are still open.
const fetchWait = 500 * time.Millisecond

// ReadLast returns the newest committed checkpoint stored under key in
// topic, and whether there is one. It reads the key's partition (see
// Partition) from its log start to its high watermark as of the call,
// isolation read_committed, waiting while a transaction that wrote below
// that mark is still open (at most until the broker aborts it after its
// transaction timeout, or until ctx ends): a checkpoint committed after
// another slot's open transaction is thus not missed. Records of aborted
// transactions are dropped here, as the Java consumer drops them: the
// broker returns them, with the list of aborted transactions, even at
// read_committed, and kafka-go's Client.Fetch hands them over as data.
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
// (ErrBadRecord, ErrUnsupportedVersion), not a missing checkpoint.
func ReadLast(ctx context.Context, client *kafka.Client, topic, key string) (Record, bool, error) {
	return readLast(ctx, client, topic, key, fetchMaxBytes)
}

func readLast(ctx context.Context, client *kafka.Client, topic, key string, maxBytes int32) (Record, bool, error) {
	exists, partitions, err := describeTopic(ctx, client, topic)
	if err != nil || !exists || partitions == 0 {
		return Record{}, false, err
	}
	p := Partition(key, partitions)
	first, end, err := bounds(ctx, client, topic, p)
	if err != nil {
		return Record{}, false, err
	}
	rd := &reader{client: client, topic: topic, partition: p, key: []byte(key), maxBytes: maxBytes}
	// Window by window from the end back, until one holds a record under
	// the key: its last is the newest.
	for hi := end; hi > first && !rd.seen; hi -= readWindow {
		rd.end = hi
		if err := rd.readFrom(ctx, max(first, hi-readWindow)); err != nil {
			return Record{}, false, err
		}
	}
	if rd.last == nil {
		return Record{}, false, nil
	}
	r, err := Decode(rd.last)
	if err != nil {
		return Record{}, false, fmt.Errorf("read checkpoint of %s from %s/%d: %w", key, topic, p, err)
	}
	return r, true, nil
}

// readWindow is how many offsets readLast reads at a time, from the end of
// the partition back. A slot's last checkpoint is usually among the last
// records (each slot's commit takes two offsets: its record and the commit
// marker), while the uncompacted tail of the log may hold a hundred
// thousand: reading all of it would take as many batches, and kafka-go
// decodes each batch of a response into 64 KiB pages of its own (a relay
// committing every 10 ms for 25 s read 216 MiB of pages at its next start).
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
			return err
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

// bounds returns partition p's log start offset and high watermark.
func bounds(ctx context.Context, client *kafka.Client, topic string, p int) (first, end int64, err error) {
	for i, at := range []int64{kafka.FirstOffset, kafka.LastOffset} {
		// One request each: a broker may refuse a partition twice in one.
		res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{topic: {{Partition: p, Timestamp: at}}},
		})
		if err != nil {
			return 0, 0, fmt.Errorf("list offsets of %s/%d: %w", topic, p, err)
		}
		offsets := res.Topics[topic]
		if len(offsets) != 1 {
			return 0, 0, fmt.Errorf("list offsets of %s/%d: %d answers", topic, p, len(offsets))
		}
		if offsets[0].Error != nil {
			return 0, 0, fmt.Errorf("list offsets of %s/%d: %w", topic, p, offsets[0].Error)
		}
		if i == 0 {
			first = offsets[0].FirstOffset
		} else {
			end = offsets[0].LastOffset
		}
	}
	return first, end, nil
}

// reader reads one key's records from one partition, across fetches.
type reader struct {
	client    *kafka.Client
	topic     string
	partition int
	key       []byte
	end       int64 // records at or past it are not read
	maxBytes  int32
	last      []byte // the newest value under key so far; nil for none or a tombstone
	seen      bool   // a committed record under key was read (a tombstone too)
	lso       int64  // the last stable offset, as of the latest fetch
}

// fetchOnce sends one read_committed fetch at offset and keeps the value of
// each committed data record under the key below end. It returns the
// offset to fetch next, which is offset itself when nothing is stable there
// yet.
func (rd *reader) fetchOnce(ctx context.Context, offset int64) (int64, error) {
	part, err := fetch(ctx, rd.client, rd.topic, rd.partition, offset, rd.maxBytes)
	if err != nil {
		return 0, err
	}
	rd.lso = part.LastStableOffset
	var batches []protocol.RecordReader
	switch rs := part.RecordSet.Records.(type) {
	case nil:
	case *protocol.RecordStream:
		batches = rs.Records
	default:
		return 0, fmt.Errorf("fetch %s/%d at %d: unexpected record set %T", rd.topic, rd.partition, offset, rs)
	}
	if len(batches) == 0 {
		// Nothing stable at offset yet: an open transaction's records
		// follow (the batches between may have been compacted away).
		return offset, nil
	}
	w := walk{reader: rd, aborted: newAbortedIndex(part.AbortedTransactions), from: offset, next: offset}
	for _, b := range batches {
		if err := w.batch(b); err != nil {
			return 0, fmt.Errorf("fetch %s/%d at %d: %w", rd.topic, rd.partition, offset, err)
		}
	}
	// Batches were returned but none held a record at or after offset: a
	// batch emptied by compaction covers it.
	return max(w.next, offset+1), nil
}

// fetch sends the fetch request itself: kafka.Client.Fetch drops the
// response's aborted transactions, which fetchOnce needs.
func fetch(ctx context.Context, client *kafka.Client, topic string, p int, offset int64, maxBytes int32) (*fetchAPI.ResponsePartition, error) {
	if client.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, client.Timeout)
		defer cancel()
	}
	transport := client.Transport
	if transport == nil {
		transport = kafka.DefaultTransport
	}
	m, err := transport.RoundTrip(ctx, client.Addr, &fetchAPI.Request{
		ReplicaID: -1, MaxWaitTime: int32(fetchWait / time.Millisecond), MinBytes: 1, MaxBytes: fetchResponseMaxBytes,
		IsolationLevel: int8(kafka.ReadCommitted), SessionID: -1, SessionEpoch: -1,
		Topics: []fetchAPI.RequestTopic{{Topic: topic, Partitions: []fetchAPI.RequestPartition{{
			Partition: int32(p), CurrentLeaderEpoch: -1, FetchOffset: offset, LogStartOffset: -1, PartitionMaxBytes: maxBytes,
		}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, err)
	}
	res := m.(*fetchAPI.Response)
	if res.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, kafka.Error(res.ErrorCode))
	}
	if len(res.Topics) != 1 || len(res.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch %s/%d at %d: no answer for the partition", topic, p, offset)
	}
	part := &res.Topics[0].Partitions[0]
	if part.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, kafka.Error(part.ErrorCode))
	}
	return part, nil
}

// walk reads one fetch response's batches in offset order.
type walk struct {
	*reader
	aborted *abortedIndex
	from    int64 // records before it were read by an earlier fetch
	next    int64 // one past the newest offset seen
}

func (w *walk) batch(b protocol.RecordReader) error {
	switch b := b.(type) {
	case *protocol.ControlBatch:
		w.aborted.reach(b.BaseOffset)
		return w.control(b)
	case *protocol.RecordBatch:
		w.aborted.reach(b.BaseOffset)
		skip := b.Attributes.Transactional() && w.aborted.aborts(b.ProducerID)
		return w.records(b, skip)
	case *protocol.MessageSet: // the v0/v1 format, from before transactions
		return w.records(b, false)
	}
	return fmt.Errorf("unexpected batch %T", b)
}

// control reads a transaction marker: an abort marker ends its producer's
// aborted transaction, so that the producer's next transaction is read.
func (w *walk) control(b *protocol.ControlBatch) error {
	for {
		r, err := b.ReadControlRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("control record: %w", err)
		}
		w.next = max(w.next, r.Offset+1)
		if r.Type == controlAbort {
			w.aborted.end(b.ProducerID)
		}
	}
}

// records keeps the value of each record under the key, unless skip (an
// aborted transaction's batch).
func (w *walk) records(b protocol.RecordReader, skip bool) error {
	for {
		r, err := b.ReadRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("record: %w", err)
		}
		w.next = max(w.next, r.Offset+1)
		mine := !skip && r.Offset >= w.from && r.Offset < w.end
		if err := w.record(r, mine); err != nil {
			return fmt.Errorf("record at %d: %w", r.Offset, err)
		}
	}
}

// record keeps r's value (nil for a tombstone) if it may and r is under the
// key, and releases r's buffers.
func (w *walk) record(r *protocol.Record, may bool) error {
	for _, b := range []protocol.Bytes{r.Key, r.Value} {
		if b != nil {
			defer b.Close()
		}
	}
	if !may {
		return nil
	}
	key, err := protocol.ReadAll(r.Key)
	if err != nil || !bytes.Equal(key, w.key) {
		return err
	}
	value, err := protocol.ReadAll(r.Value)
	if err != nil {
		return err
	}
	w.last, w.seen = value, true
	return nil
}

// controlAbort is the type of an abort marker's control record (a commit
// marker's is 1).
const controlAbort = 0

// abortedIndex is the Java consumer's bookkeeping of aborted transactions
// in one fetch response: the response lists each aborted transaction that
// overlaps it by producer and first offset; a producer's batches are
// dropped from its transaction's first offset until its abort marker.
type abortedIndex struct {
	pending []fetchAPI.ResponseTransaction // not reached yet, by first offset
	open    map[int64]bool                 // producers inside an aborted transaction
}

func newAbortedIndex(list []fetchAPI.ResponseTransaction) *abortedIndex {
	pending := slices.Clone(list)
	slices.SortFunc(pending, func(a, b fetchAPI.ResponseTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &abortedIndex{pending: pending, open: map[int64]bool{}}
}

// reach opens the aborted transactions that begin at or before offset, the
// base offset of the batch about to be read. A transaction's first offset
// is the base offset of its first batch, so comparing with the base (the
// Java client compares with the last offset) opens the same ones.
func (a *abortedIndex) reach(offset int64) {
	for len(a.pending) > 0 && a.pending[0].FirstOffset <= offset {
		a.open[a.pending[0].ProducerID] = true
		a.pending = a.pending[1:]
	}
}

// aborts reports whether producer's current transaction was aborted.
func (a *abortedIndex) aborts(producer int64) bool { return a.open[producer] }

// end closes producer's aborted transaction at its abort marker.
func (a *abortedIndex) end(producer int64) { delete(a.open, producer) }
