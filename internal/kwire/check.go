package kwire

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/segmentio/kafka-go/protocol"
)

// Check reports whether frame, an answer to a request of key at version
// (its size prefix, correlation id, header and body), is safe to hand to
// kafka-go's protocol.ReadResponse: it walks the answer as kafka-go's
// decoder will, over the response type kafka-go decodes it into, and
// every length it meets (strings, bytes, arrays, tagged fields, record
// sets, compact and varint forms) must fit in the bytes left. Bytes past
// the end of the response are allowed, as kafka-go skips them (a newer
// broker's fields). It errs on the strict side: an answer kafka-go would
// decode leniently (an array cut short at the end of the frame) is
// malformed here.
func Check(key protocol.ApiKey, version int16, frame []byte) error {
	a, ok := apis[key]
	if !ok {
		return &MalformedError{ApiKey: key, Version: version, Err: errors.New("no response type known for this API")}
	}
	if err := checkFrame(a.res, a.resFlexibleMin, version, frame); err != nil {
		return &MalformedError{ApiKey: key, Version: version, Err: err}
	}
	return nil
}

// checkFrame walks frame as an answer of type res at version; flexible is
// res's first flexible version (-1: none).
func checkFrame(res reflect.Type, flexible, version int16, frame []byte) error {
	w := &walker{b: frame}
	size, err := w.int32()
	if err != nil {
		return err
	}
	if size < 4 || int(size) > len(frame)-4 {
		return fmt.Errorf("frame size %d, with %d bytes after it", size, len(frame)-4)
	}
	w.b = frame[:4+int(size)]
	if err := w.skip(4); err != nil { // correlation id
		return err
	}
	flex := flexible >= 0 && version >= flexible
	if flex {
		if err := w.taggedFields(nil); err != nil {
			return fmt.Errorf("response header: %w", err)
		}
	}
	return checkerOf(res, version, flex)(w)
}

// walker reads an answer as kafka-go's decoder does, allocating nothing
// from what it reads.
type walker struct {
	b        []byte
	off      int
	inflated int // bytes of record batches decompressed so far
}

func (w *walker) left() int { return len(w.b) - w.off }

// need fails unless n more bytes are there.
func (w *walker) need(n uint64, what string) error {
	if n > uint64(w.left()) {
		return fmt.Errorf("%s needs %d bytes at offset %d, %d left", what, n, w.off, w.left())
	}
	return nil
}

func (w *walker) skip(n int) error {
	if err := w.need(uint64(n), "field"); err != nil {
		return err
	}
	w.off += n
	return nil
}

func (w *walker) int16() (int16, error) {
	if err := w.need(2, "int16"); err != nil {
		return 0, err
	}
	v := int16(uint16(w.b[w.off])<<8 | uint16(w.b[w.off+1]))
	w.off += 2
	return v, nil
}

func (w *walker) int32() (int32, error) {
	if err := w.need(4, "int32"); err != nil {
		return 0, err
	}
	b := w.b[w.off:]
	w.off += 4
	return int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])), nil
}

// uvarint reads an unsigned varint as kafka-go does: at most 11 bytes.
func (w *walker) uvarint() (uint64, error) {
	var x uint64
	var s uint
	for n := min(11, w.left()); n > 0; n-- {
		b := w.b[w.off]
		w.off++
		if b&0x80 == 0 {
			return x | uint64(b)<<s, nil
		}
		x |= uint64(b&0x7f) << s
		s += 7
	}
	return 0, fmt.Errorf("unterminated varint at offset %d", w.off)
}

// varint reads a zig-zag varint as kafka-go does.
func (w *walker) varint() (int64, error) {
	x, err := w.uvarint()
	return int64(x>>1) ^ -(int64(x) & 1), err
}

// taggedFields walks a tagged-field buffer: kafka-go decodes a tag it
// knows (known) as its field, whatever size the buffer claims for it, and
// reads the size's bytes of any other.
func (w *walker) taggedFields(known map[int]checkFunc) error {
	n, err := w.uvarint()
	if err != nil {
		return err
	}
	if err := w.need(n, "tagged fields (one byte each at least)"); err != nil {
		return err
	}
	for range n {
		id, err := w.uvarint()
		if err != nil {
			return err
		}
		size, err := w.uvarint()
		if err != nil {
			return err
		}
		if err := w.need(size, fmt.Sprintf("tagged field %d", int(id))); err != nil {
			return err
		}
		if check, ok := known[int(id)]; ok {
			err = check(w)
		} else {
			w.off += int(size)
		}
		if err != nil {
			return fmt.Errorf("tagged field %d: %w", int(id), err)
		}
	}
	return nil
}

type checkFunc func(*walker) error

type plan struct {
	typ      reflect.Type
	version  int16
	flexible bool
}

var plans sync.Map // plan → checkFunc

var readerFrom = reflect.TypeOf((*io.ReaderFrom)(nil)).Elem()

// checkerOf mirrors kafka-go's decodeFuncOf: the same type, version and
// flexibility give the walk of the same bytes.
func checkerOf(typ reflect.Type, version int16, flexible bool) checkFunc {
	key := plan{typ, version, flexible}
	if f, ok := plans.Load(key); ok {
		return f.(checkFunc)
	}
	f := newChecker(typ, version, flexible)
	plans.Store(key, f)
	return f
}

func newChecker(typ reflect.Type, version int16, flexible bool) checkFunc {
	if reflect.PointerTo(typ).Implements(readerFrom) {
		if typ != reflect.TypeOf(protocol.RecordSet{}) && typ != reflect.TypeOf(protocol.RawRecordSet{}) {
			return func(*walker) error { return fmt.Errorf("cannot check a %s", typ) }
		}
		return (*walker).recordSet
	}
	switch typ.Kind() {
	case reflect.Bool, reflect.Int8:
		return fixed(1)
	case reflect.Int16:
		return fixed(2)
	case reflect.Int32:
		return fixed(4)
	case reflect.Int64, reflect.Float64:
		return fixed(8)
	case reflect.String:
		if flexible {
			return (*walker).compactBytes
		}
		return (*walker).string
	case reflect.Struct:
		return structChecker(typ, version, flexible)
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			if flexible {
				return (*walker).compactBytes
			}
			return (*walker).bytes
		}
		return arrayChecker(typ.Elem(), version, flexible)
	}
	return func(*walker) error { return fmt.Errorf("cannot check a %s", typ) }
}

func fixed(n int) checkFunc { return func(w *walker) error { return w.skip(n) } }

func (w *walker) string() error {
	n, err := w.int16()
	if err != nil || n < 0 {
		return err
	}
	return w.skipLength(uint64(n), "string")
}

func (w *walker) bytes() error {
	n, err := w.int32()
	if err != nil || n < 0 {
		return err
	}
	return w.skipLength(uint64(n), "bytes")
}

// compactBytes walks a compact string or bytes: its length plus one, 0
// for null.
func (w *walker) compactBytes() error {
	n, err := w.uvarint()
	if err != nil || n < 1 {
		return err
	}
	return w.skipLength(n-1, "compact string or bytes")
}

func (w *walker) skipLength(n uint64, what string) error {
	if err := w.need(n, what); err != nil {
		return err
	}
	w.off += int(n)
	return nil
}

// structChecker mirrors kafka-go's structDecodeFuncOf: the required fields
// of version in order, then (flexible) a tagged-field buffer.
func structChecker(typ reflect.Type, version int16, flexible bool) checkFunc {
	var required []checkFunc
	var names []string
	tagged := map[int]checkFunc{}
	for _, f := range fieldsOf(typ) {
		for _, g := range f.tags {
			if g.min <= version && version <= g.max {
				check := checkerOf(f.typ, version, flexible)
				if g.tagID < -1 {
					required = append(required, check)
					names = append(names, typ.Field(f.index).Name)
				} else {
					tagged[g.tagID] = check
				}
				break
			}
		}
	}
	return func(w *walker) error {
		for i, check := range required {
			if err := check(w); err != nil {
				return fmt.Errorf("%s.%s: %w", typ.Name(), names[i], err)
			}
		}
		if !flexible {
			return nil
		}
		return w.taggedFields(tagged)
	}
}

// arrayChecker mirrors kafka-go's decodeArray and decodeCompactArray, which
// allocate the count they read before reading an element: the count must
// fit in the bytes left at one byte an element, and every element must be
// there.
func arrayChecker(elem reflect.Type, version int16, flexible bool) checkFunc {
	check := checkerOf(elem, version, flexible) // kafka-go's types nest, never recur
	return func(w *walker) error {
		var n uint64
		if flexible {
			c, err := w.uvarint()
			if err != nil || c < 1 {
				return err
			}
			n = c - 1
		} else {
			c, err := w.int32()
			if err != nil || c < 0 {
				return err
			}
			n = uint64(c)
		}
		if n > uint64(w.left()) { // what need says, its message built only when it fails
			return w.need(n, fmt.Sprintf("array of %d %s (one byte each at least)", n, elem))
		}
		for i := range n {
			if err := check(w); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	}
}
