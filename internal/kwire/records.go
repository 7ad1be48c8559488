package kwire

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
)

// maxInflated bounds the bytes the compressed record batches of one answer
// decompress to: kafka-go decompresses each batch of a fetch answer whole
// into memory, so a few kilobytes of a compression bomb would otherwise
// take all of it. The relay fetches at most 50 MiB of checkpoints, or 4
// MiB of dead letters, at once; a ratio of 2 over the largest frame is
// beyond what real records compress by.
var maxInflated = 2 * MaxFrame

// Sizes of a record batch (magic 2) and of a message (magic 0 and 1).
const (
	batchPrefix   = 8 + 4                                     // base offset, batch length
	batchHeader   = 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4 // after the length, up to the record count
	magicOffset   = 16                                        // kafka-go's magicByteOffset
	recordMinimum = 7                                         // seven varints or bytes, a byte each at least
)

// recordSet mirrors kafka-go's RecordSet.ReadFrom: a size, then record
// batches (or messages) up to it, the last of which may be cut short.
func (w *walker) recordSet() error {
	size, err := w.int32()
	if err != nil || size <= 0 {
		return err
	}
	if err := w.need(uint64(size), "record set"); err != nil {
		return err
	}
	end := w.off + int(size)
	outer := w.b
	w.b = w.b[:end]
	defer func() { w.b = outer }()
	for batches := 0; w.left() > 0; batches++ {
		if w.left() < magicOffset+1 {
			if batches > 0 {
				break // kafka-go drops the tail
			}
			return fmt.Errorf("record set of %d bytes", w.left())
		}
		var err error
		switch magic := w.b[w.off+magicOffset]; magic {
		case 0, 1:
			err = w.message(true)
		case 2:
			err = w.batch()
		default:
			err = fmt.Errorf("record batch of magic %d", magic)
		}
		if errors.Is(err, errTruncated) {
			break
		}
		if err != nil {
			return fmt.Errorf("record batch %d: %w", batches, err)
		}
	}
	w.off = end
	return nil
}

// errTruncated is a batch cut short at the end of its record set, which
// kafka-go (and the broker's protocol) allows: the rest is skipped.
var errTruncated = errors.New("truncated batch")

// batch mirrors kafka-go's readFromVersion2.
func (w *walker) batch() error {
	_ = w.skip(8) // base offset: the record set has 17 bytes at least
	length, err := w.int32()
	if err != nil {
		return err
	}
	switch {
	case length < 0:
		return fmt.Errorf("batch length %d", length)
	case int(length) > w.left():
		return errTruncated
	case length < batchHeader:
		return fmt.Errorf("batch length %d, short of its %d bytes of header", length, batchHeader)
	}
	head := w.b[w.off : w.off+batchHeader]
	payload := w.b[w.off+batchHeader : w.off+int(length)]
	w.off += int(length)
	attributes := protocol.Attributes(int16(uint16(head[9])<<8 | uint16(head[10])))
	count := int32(uint32(head[45])<<24 | uint32(head[46])<<16 | uint32(head[47])<<8 | uint32(head[48]))
	if c := attributes.Compression(); c != 0 {
		if payload, err = w.inflate(c, payload); err != nil {
			return err
		}
	}
	if count < 0 || int64(count) > int64(len(payload)/recordMinimum) {
		return fmt.Errorf("%d records in %d bytes", count, len(payload))
	}
	r := &walker{b: payload}
	for i := range count {
		if err := r.record(); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
	return nil
}

// record walks one record of a batch as kafka-go reads it.
func (w *walker) record() error {
	if _, err := w.varint(); err != nil { // length, unused by kafka-go
		return err
	}
	if err := w.skip(1); err != nil { // attributes
		return err
	}
	for range 2 { // timestamp and offset deltas
		if _, err := w.varint(); err != nil {
			return err
		}
	}
	for _, what := range []string{"key", "value"} {
		if err := w.varBytes(what); err != nil {
			return err
		}
	}
	n, err := w.varint()
	if err != nil || n <= 0 {
		return err
	}
	if err := w.need(uint64(n), "headers (two bytes each at least)"); err != nil {
		return err
	}
	for range n {
		if err := w.varBytes("header key"); err != nil {
			return err
		}
		if err := w.varBytes("header value"); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) varBytes(what string) error {
	n, err := w.varint()
	if err != nil || n < 0 {
		return err
	}
	return w.skipLength(uint64(n), what)
}

// message mirrors kafka-go's readMessage (magic 0 and 1), whose size must
// be its fields' exactly: kafka-go reads the fields, not the size, and
// would take what is left for the next message. A compressed message
// holds messages, which kafka-go reads from its decompressed value.
func (w *walker) message(outer bool) error {
	_ = w.skip(8) // offset
	size, err := w.int32()
	if err != nil {
		return err
	}
	if size < 0 || int(size) > w.left() {
		if outer && size >= 0 {
			return errTruncated
		}
		return fmt.Errorf("message size %d, with %d bytes left", size, w.left())
	}
	m := &walker{b: w.b[w.off : w.off+int(size)]}
	w.off += int(size)
	if err := m.skip(4); err != nil { // crc
		return err
	}
	if err := m.need(2, "magic and attributes"); err != nil {
		return err
	}
	magic, attributes := m.b[m.off], protocol.Attributes(m.b[m.off+1])
	m.off += 2
	if magic != 0 {
		if err := m.skip(8); err != nil { // timestamp
			return err
		}
	}
	if err := m.bytes(); err != nil { // key
		return err
	}
	start := m.off
	if err := m.bytes(); err != nil { // value
		return err
	}
	if m.left() != 0 {
		return fmt.Errorf("message of %d bytes, with %d past its value", size, m.left())
	}
	c := attributes.Compression()
	if !outer || c == 0 || m.off-start == 4 {
		return nil
	}
	inner, err := w.inflate(c, m.b[start+4:])
	if err != nil {
		return err
	}
	r := &walker{b: inner}
	for r.left() >= batchPrefix { // kafka-go stops at the first short one
		if err := r.message(false); err != nil {
			return fmt.Errorf("inner message: %w", err)
		}
	}
	return nil
}

// inflate decompresses a batch's records (or a message's messages),
// within what is left of maxInflated for the answer.
func (w *walker) inflate(c compress.Compression, b []byte) ([]byte, error) {
	codec := c.Codec()
	if codec == nil {
		return nil, fmt.Errorf("compression codec %d", c)
	}
	r := codec.NewReader(bytes.NewReader(b))
	defer r.Close()
	budget := int64(maxInflated - w.inflated)
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(r, budget+1))
	if err != nil {
		return nil, fmt.Errorf("decompress %s records: %w", c, err)
	}
	if n > budget {
		return nil, fmt.Errorf("%s records of the answer inflate past %d bytes", c, maxInflated)
	}
	w.inflated += int(n)
	return out.Bytes(), nil
}
