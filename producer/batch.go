package producer

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// Record is one record of a batch. A nil Key or Value is written as null
// (a tombstone's value), an empty one as empty.
type Record struct {
	Key     []byte
	Value   []byte
	Headers []kafka.Header
	// Time is the record's timestamp; zero: the time of encoding, as
	// kafka-go's encoder does.
	Time time.Time
}

// BatchHeader holds the producer fields of a batch. The zero value is not
// "no producer": use NoProducer for a batch without idempotence.
type BatchHeader struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool
}

// NoProducer is the header of a batch sent without idempotence (what
// kafka-go's encoder always writes).
var NoProducer = BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// Offsets of the batch header's fields (Kafka's DefaultRecordBatch).
const (
	lengthOffset     = 8
	crcOffset        = 17
	attributesOffset = 21
	headerSize       = 61
	transactionalBit = 0x10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// scratch holds the uncompressed records of a compressed batch.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// AppendBatch appends one record batch of records to dst: base offset 0,
// partition leader epoch −1, magic 2, the CRC-32C over everything after
// it. codec 0 is none; otherwise kafka-go's codec of that number
// compresses the records.
func AppendBatch(dst []byte, h BatchHeader, records []Record, codec compress.Compression) ([]byte, error) {
	if len(records) == 0 {
		return dst, ErrNoRecords
	}
	if len(records) > math.MaxInt32 {
		return dst, fmt.Errorf("record batch of %d records: too many", len(records))
	}
	start := len(dst)
	now := time.Now().UnixMilli()
	first := millis(records[0].Time, now)
	maxTime := first
	for i := range records {
		maxTime = max(maxTime, millis(records[i].Time, now))
	}
	attrs := int16(codec) & 7
	if h.Transactional {
		attrs |= transactionalBit
	}
	dst = binary.BigEndian.AppendUint64(dst, 0)              // base offset
	dst = binary.BigEndian.AppendUint32(dst, 0)              // length, set below
	dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // partition leader epoch −1
	dst = append(dst, 2)                                     // magic
	dst = binary.BigEndian.AppendUint32(dst, 0)              // CRC, set below
	dst = binary.BigEndian.AppendUint16(dst, uint16(attrs))  // attributes
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(records)-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(first))
	dst = binary.BigEndian.AppendUint64(dst, uint64(maxTime))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(records)))
	var err error
	if codec == 0 {
		dst = appendRecords(dst, records, first, now)
	} else if dst, err = appendCompressed(dst, records, first, now, codec); err != nil {
		return dst[:start], err
	}
	batch := dst[start:]
	binary.BigEndian.PutUint32(batch[lengthOffset:], uint32(len(batch)-12))
	binary.BigEndian.PutUint32(batch[crcOffset:], crc32.Checksum(batch[attributesOffset:], castagnoli))
	return dst, nil
}

// appendCompressed appends records compressed by codec.
func appendCompressed(dst []byte, records []Record, first, now int64, codec compress.Compression) ([]byte, error) {
	c := codec.Codec()
	if c == nil {
		return dst, fmt.Errorf("unknown compression codec %d", codec)
	}
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	*buf = appendRecords((*buf)[:0], records, first, now)
	out := &appender{b: dst}
	z := c.NewWriter(out)
	if _, err := z.Write(*buf); err != nil {
		z.Close()
		return dst, fmt.Errorf("compress a record batch (%s): %w", c.Name(), err)
	}
	if err := z.Close(); err != nil {
		return dst, fmt.Errorf("compress a record batch (%s): %w", c.Name(), err)
	}
	return out.b, nil
}

// appender is an io.Writer appending to a slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// appendRecords appends each record: its length, then attributes (0),
// timestamp and offset deltas, key, value and headers, all varints
// (zig-zag, as encoding/binary writes them).
func appendRecords(dst []byte, records []Record, first, now int64) []byte {
	for i := range records {
		r := &records[i]
		tsDelta := millis(r.Time, now) - first
		size := 1 + varintSize(tsDelta) + varintSize(int64(i)) +
			nullBytesSize(r.Key) + nullBytesSize(r.Value) + varintSize(int64(len(r.Headers)))
		for _, h := range r.Headers {
			size += varintSize(int64(len(h.Key))) + len(h.Key) + nullBytesSize(h.Value)
		}
		dst = binary.AppendVarint(dst, int64(size))
		dst = append(dst, 0)
		dst = binary.AppendVarint(dst, tsDelta)
		dst = binary.AppendVarint(dst, int64(i))
		dst = appendNullBytes(dst, r.Key)
		dst = appendNullBytes(dst, r.Value)
		dst = binary.AppendVarint(dst, int64(len(r.Headers)))
		for _, h := range r.Headers {
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendNullBytes(dst, h.Value)
		}
	}
	return dst
}

// appendNullBytes appends b's length and b; nil is length −1 (null).
func appendNullBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func nullBytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the length of v as a zig-zag varint.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// millis is t in Unix milliseconds; zero: now.
func millis(t time.Time, now int64) int64 {
	if t.IsZero() {
		return now
	}
	return t.UnixMilli()
}
