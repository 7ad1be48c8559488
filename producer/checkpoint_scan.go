package producer

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/segmentio/kafka-go/protocol"
)

// scan reads the record batches of one fetch response, in offset order, for
// the records of one key (a checkpoint read) or for every record (a topic
// read, whole: see topic_read.go): it decodes each batch's header, and the
// records of a batch only when the batch is committed data that may hold a
// record of the window [from, end); it copies only the records it keeps.
// It keeps one batch in memory at a time.
type scan struct {
	key  []byte
	from int64 // records before it are another window's
	end  int64 // records at or past it are not read

	// A topic read's: it keeps every record (not only key's) up to keep
	// bytes of them (but at least one), reads at read_uncommitted, and
	// bounds records by its limits instead of a checkpoint topic's.
	whole  bool
	keep   int64
	limits limits

	out     *scanned
	aborted *abortedIndex
	buf     []byte        // the batch being read
	inflate *bufio.Reader // over the compressed batch being read
	record  []byte        // its record being read
}

// The framing of a record batch (format v2, Kafka's DefaultRecordBatch):
// its base offset and length, then batchHeader bytes of fields, then its
// records. Every format has its magic byte at magicAt after the length.
const (
	logOverhead = 12
	batchHeader = 49
	magicAt     = 4
)

// errTruncated is a record shorter than its fields say.
var errTruncated = errors.New("truncated record")

// records reads size bytes of batches from w.
func (s *scan) records(w *wire, size int64) error {
	for size >= logOverhead {
		base, length := w.int64(), int64(w.int32())
		size -= logOverhead
		if w.err != nil {
			return w.err
		}
		if length > size { // a batch cut short at the fetch's size (brokers before KIP-74)
			break
		}
		if length <= magicAt {
			return fmt.Errorf("batch at %d: %d bytes", base, length)
		}
		if int64(cap(s.buf)) < length {
			s.buf = make([]byte, length)
		}
		b := s.buf[:length]
		if w.read(b); w.err != nil {
			return w.err
		}
		size -= length
		if err := s.batch(base, b); err != nil {
			return fmt.Errorf("batch at %d: %w", base, err)
		}
	}
	w.skip(size)
	return w.err
}

// batch reads one batch, b from its partition leader epoch on.
func (s *scan) batch(base int64, b []byte) error {
	if s.out.full { // a topic read kept all it may: the next read starts at the first record it left
		return nil
	}
	if magic := b[magicAt]; magic != 2 {
		return fmt.Errorf("record format v%d: only v2 batches (Kafka 0.11 on) are read", magic)
	}
	if len(b) < batchHeader {
		return fmt.Errorf("%d bytes", len(b))
	}
	if crc := binary.BigEndian.Uint32(b[5:9]); crc != crc32.Checksum(b[9:], castagnoli) {
		return fmt.Errorf("crc %08x does not match the batch", crc)
	}
	attrs := protocol.Attributes(binary.BigEndian.Uint16(b[9:11]))
	last := base + int64(int32(binary.BigEndian.Uint32(b[11:15])))
	producer := int64(binary.BigEndian.Uint64(b[31:39]))
	count := int32(binary.BigEndian.Uint32(b[45:49]))
	// The next fetch starts past the batch, even one that compaction
	// emptied of its records.
	s.out.batches++
	s.out.next = max(s.out.next, last+1)
	s.aborted.reach(base)
	switch {
	case attrs.Control():
		return s.control(producer, b[batchHeader:], count)
	case attrs.Transactional() && s.aborted.aborts(producer):
		return nil
	case last < s.from || base >= s.end:
		return nil
	}
	bodies := &recordBodies{flat: b[batchHeader:]}
	if c := attrs.Compression(); c != 0 {
		codec := c.Codec()
		if codec == nil {
			return fmt.Errorf("unsupported compression %d", c)
		}
		r := codec.NewReader(bytes.NewReader(b[batchHeader:]))
		defer r.Close()
		// The CRC covers the compressed bytes only: what they inflate to
		// is the broker's word. A batch is read no further than its
		// limit, a record no longer than its own (a checkpoint read's:
		// maxInflatedBatch, maxRecordBytes).
		inflated := io.LimitReader(r, s.limits.orDefault().batch)
		if s.inflate == nil {
			s.inflate = bufio.NewReader(inflated)
		}
		s.inflate.Reset(inflated)
		bodies = &recordBodies{r: s.inflate, buf: s.record, limit: s.limits.orDefault().record}
		defer func() { s.record = bodies.buf }()
	}
	for i := range count {
		r, err := bodies.record(base)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i, count, err)
		}
		switch {
		case r.offset < s.from || r.offset >= s.end:
		case s.whole:
			if err := s.keepRecord(r, b); err != nil || s.out.full {
				return err
			}
		case bytes.Equal(r.key, s.key):
			s.out.last, s.out.seen = bytes.Clone(r.value), true
		}
	}
	return nil
}

// control reads a transaction marker: an abort marker ends its producer's
// aborted transaction, so that the producer's next transaction is read.
func (s *scan) control(producer int64, records []byte, count int32) error {
	bodies := &recordBodies{flat: records}
	for i := range count {
		r, err := bodies.record(0)
		if err != nil {
			return fmt.Errorf("control record %d: %w", i, err)
		}
		if len(r.key) >= 4 && int16(binary.BigEndian.Uint16(r.key[2:4])) == controlAbort {
			s.aborted.end(producer)
		}
	}
	return nil
}

// controlAbort is the type of an abort marker's control record (a commit
// marker's is 1), after the key's version.
const controlAbort = 0

// maxRecordBytes bounds one record of a compressed batch, and
// maxInflatedBatch what one batch inflates to: a checkpoint record is a few
// hundred bytes, and a batch at most a segment (checkpoint_topic.go) before
// compression.
const (
	maxRecordBytes   = segmentBytes
	maxInflatedBatch = 4 * segmentBytes
)

// limits bound what a compressed batch may inflate to: one record, and
// the whole batch. The zero value is a checkpoint topic's.
type limits struct{ record, batch int64 }

func (l limits) orDefault() limits {
	if l.record <= 0 || l.batch <= 0 {
		return limits{record: maxRecordBytes, batch: maxInflatedBatch}
	}
	return l
}

// recordBodies yields the records of a batch: from its bytes, or from its
// decompressed stream, one record at a time.
type recordBodies struct {
	flat  []byte
	r     *bufio.Reader
	buf   []byte
	limit int64 // of one record of the stream
}

// rawRecord is a record as a batch holds it: key and value nil when null,
// headers their count and bytes, unread. Its slices are valid until the
// next record is read.
type rawRecord struct {
	offset, timestampDelta int64
	key, value, headers    []byte
}

// record returns the next record.
func (rb *recordBodies) record(base int64) (rawRecord, error) {
	var body []byte
	if rb.r == nil {
		n, k := binary.Varint(rb.flat)
		if k <= 0 || n < 0 || n > int64(len(rb.flat)-k) {
			return rawRecord{}, errTruncated
		}
		body, rb.flat = rb.flat[k:k+int(n)], rb.flat[k+int(n):]
	} else {
		n, err := binary.ReadVarint(rb.r)
		if err != nil || n < 0 {
			return rawRecord{}, errors.Join(errTruncated, err)
		}
		if n > rb.limit {
			return rawRecord{}, fmt.Errorf("a record of %d bytes, over the %d a record read here may have: %w", n, rb.limit, errTruncated)
		}
		if int64(cap(rb.buf)) < n {
			// Grown as the bytes arrive: a length the stream does not
			// hold costs nothing.
			var grown bytes.Buffer
			grown.Grow(int(min(n, 64<<10)))
			_, err := io.CopyN(&grown, rb.r, n)
			rb.buf = grown.Bytes()
			if err != nil {
				return rawRecord{}, errors.Join(errTruncated, err)
			}
		} else if _, err := io.ReadFull(rb.r, rb.buf[:n]); err != nil {
			return rawRecord{}, errors.Join(errTruncated, err)
		}
		body = rb.buf[:n]
	}
	f := fields{b: body}
	f.skip(1) // attributes
	var r rawRecord
	r.timestampDelta = f.varint()
	r.offset = base + f.varint()
	r.key = f.bytes()
	r.value = f.bytes()
	r.headers = f.b
	return r, f.err
}

// fields reads a record's fields off its bytes; its first error sticks.
type fields struct {
	b   []byte
	err error
}

func (f *fields) skip(n int) {
	if f.err == nil && n > len(f.b) {
		f.err = errTruncated
	}
	if f.err == nil {
		f.b = f.b[n:]
	}
}

func (f *fields) varint() int64 {
	if f.err != nil {
		return 0
	}
	v, n := binary.Varint(f.b)
	if n <= 0 {
		f.err = errTruncated
		return 0
	}
	f.b = f.b[n:]
	return v
}

// bytes reads a length and that many bytes: nil for a null (length -1), an
// empty slice for an empty field.
func (f *fields) bytes() []byte {
	n := f.varint()
	if f.err != nil || n < 0 {
		return nil
	}
	if n > int64(len(f.b)) {
		f.err = errTruncated
		return nil
	}
	v := f.b[:n:n]
	f.b = f.b[n:]
	return v
}

// abortedTxn is an aborted transaction a fetch response lists: its
// producer, and the offset of its first batch.
type abortedTxn struct {
	producer, first int64
}

// abortedIndex is the Java consumer's bookkeeping of aborted transactions
// in one fetch response: the response lists each aborted transaction that
// overlaps it by producer and first offset; a producer's batches are
// dropped from its transaction's first offset until its abort marker.
type abortedIndex struct {
	pending []abortedTxn   // not reached yet, by first offset
	open    map[int64]bool // producers inside an aborted transaction
}

func newAbortedIndex(list []abortedTxn) *abortedIndex {
	pending := slices.Clone(list)
	slices.SortFunc(pending, func(a, b abortedTxn) int { return cmp.Compare(a.first, b.first) })
	return &abortedIndex{pending: pending, open: map[int64]bool{}}
}

// reach opens the aborted transactions that begin at or before offset, the
// base offset of the batch about to be read. A transaction's first offset
// is the base offset of its first batch, so comparing with the base (the
// Java client compares with the last offset) opens the same ones.
func (a *abortedIndex) reach(offset int64) {
	for len(a.pending) > 0 && a.pending[0].first <= offset {
		a.open[a.pending[0].producer] = true
		a.pending = a.pending[1:]
	}
}

// aborts reports whether producer's current transaction was aborted.
func (a *abortedIndex) aborts(producer int64) bool { return a.open[producer] }

// end closes producer's aborted transaction at its abort marker.
func (a *abortedIndex) end(producer int64) { delete(a.open, producer) }
