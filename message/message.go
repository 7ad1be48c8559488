// Package message is the encoding of an outbox event written without a
// table: the CONTENT of a transactional logical decoding message,
// pg_logical_emit_message(true, PREFIX, CONTENT). outbox.Writer's Emit and
// sql/outbox_emit.sql encode it; the relay decodes it. Postgres decodes such
// a message at its transaction's commit, in commit order with the
// transaction's rows, and never for a transaction that rolled back.
//
// Version 1, every integer big-endian, every length in bytes:
//
//	version         1 byte, 0x01
//	id              uint32 length, UTF-8; not empty
//	aggregate_type  uint32 length, UTF-8
//	aggregate_id    uint32 length, UTF-8; not empty: the Kafka message key
//	event_type      uint32 length, UTF-8
//	content_type    uint32 length, UTF-8; empty: application/json
//	time            int64, microseconds since 1970-01-01 UTC; 0: the commit time
//	header count    uint32, then per header:
//	  key           uint32 length, UTF-8
//	  value         uint32 length, bytes
//	payload         uint32 length, bytes: the Kafka message value, as it is
//
// and nothing after. A reader meets an unknown version, a length past the
// end, bytes after the payload, text that is not UTF-8 or an empty id as a
// *FormatError, never a guess.
package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Version1 is the first byte of a version 1 message, the only one so far.
const Version1 byte = 1

// DefaultContentType is the payload's media type when a message names none.
const DefaultContentType = "application/json"

// Event is what one message carries.
type Event struct {
	ID            string
	AggregateType string
	AggregateID   string
	EventType     string
	ContentType   string    // empty: DefaultContentType
	Time          time.Time // zero: the commit time
	Headers       []Header
	Payload       []byte
}

// Header is one Kafka header.
type Header struct {
	Key   string
	Value []byte
}

// Size is the length of ev's encoding.
func Size(ev *Event) int {
	n := 1 + 4*5 + 8 + 4 + 4 + len(ev.ID) + len(ev.AggregateType) + len(ev.AggregateID) + len(ev.EventType) + len(ev.ContentType) + len(ev.Payload)
	for _, h := range ev.Headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// Append appends ev's version 1 encoding to dst. It refuses what a reader
// would refuse: an empty id or aggregate id, text that is not UTF-8.
func Append(dst []byte, ev *Event) ([]byte, error) {
	switch {
	case ev.ID == "":
		return dst, errors.New("encode outbox message: empty id")
	case ev.AggregateID == "":
		return dst, errors.New("encode outbox message: empty aggregate id: it is the Kafka message key")
	case len(ev.Payload) > math.MaxUint32:
		return dst, errors.New("encode outbox message: payload over 4 GiB")
	}
	for _, f := range []struct{ name, v string }{
		{"id", ev.ID}, {"aggregate type", ev.AggregateType}, {"aggregate id", ev.AggregateID},
		{"event type", ev.EventType}, {"content type", ev.ContentType},
	} {
		if !utf8.ValidString(f.v) {
			return dst, fmt.Errorf("encode outbox message: %s is not UTF-8", f.name)
		}
	}
	if dst == nil {
		dst = make([]byte, 0, Size(ev))
	}
	str := func(s string) {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
		dst = append(dst, s...)
	}
	dst = append(dst, Version1)
	str(ev.ID)
	str(ev.AggregateType)
	str(ev.AggregateID)
	str(ev.EventType)
	str(ev.ContentType)
	var us int64
	if !ev.Time.IsZero() {
		us = ev.Time.UnixMicro()
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(us))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(ev.Headers)))
	for _, h := range ev.Headers {
		if !utf8.ValidString(h.Key) {
			return dst, fmt.Errorf("encode outbox message: header key %q is not UTF-8", h.Key)
		}
		str(h.Key)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(ev.Payload)))
	return append(dst, ev.Payload...), nil
}

// Reasons a message cannot be read; dead letters and metrics carry them.
const (
	ReasonVersion   = "message_version"   // a version this relay does not know
	ReasonMalformed = "malformed_message" // truncated, trailing bytes, not UTF-8, no id
)

// FormatError is a message that cannot be read as an event.
type FormatError struct {
	Reason string // ReasonVersion or ReasonMalformed
	Detail string
}

func (e *FormatError) Error() string { return e.Detail }

// Decode reads a message's content. The event owns its bytes: content may
// be reused once Decode returns.
func Decode(content []byte) (Event, error) {
	if len(content) == 0 {
		return Event{}, &FormatError{ReasonMalformed, "empty content"}
	}
	if content[0] != Version1 {
		return Event{}, &FormatError{ReasonVersion, fmt.Sprintf("version %d; this relay reads version %d (upgrade it before the writers)", content[0], Version1)}
	}
	r := reader{b: content[1:]}
	var ev Event
	ev.ID = r.text("id")
	ev.AggregateType = r.text("aggregate_type")
	ev.AggregateID = r.text("aggregate_id")
	ev.EventType = r.text("event_type")
	ev.ContentType = r.text("content_type")
	if us := int64(r.uint64("time")); us != 0 {
		ev.Time = time.UnixMicro(us).UTC()
	}
	n := r.uint32("header count")
	if r.err == nil && uint64(n)*8 > uint64(len(r.b)) {
		r.fail("header count %d exceeds the %d bytes left", n, len(r.b))
	}
	if r.err == nil && n > 0 {
		ev.Headers = make([]Header, 0, n)
		for i := 0; i < int(n) && r.err == nil; i++ {
			k := r.text("header key")
			v := r.bytes("header value")
			ev.Headers = append(ev.Headers, Header{Key: k, Value: v})
		}
	}
	ev.Payload = r.bytes("payload")
	switch {
	case r.err != nil:
		return Event{}, r.err
	case len(r.b) > 0:
		return Event{}, &FormatError{ReasonMalformed, fmt.Sprintf("%d bytes after the payload", len(r.b))}
	case ev.ID == "":
		return Event{}, &FormatError{ReasonMalformed, "empty id"}
	}
	if ev.ContentType == "" {
		ev.ContentType = DefaultContentType
	}
	return ev, nil
}

// reader reads fields in order; the first failure sticks and names the
// field.
type reader struct {
	b   []byte
	err *FormatError
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &FormatError{ReasonMalformed, fmt.Sprintf(format, args...)}
	}
}

func (r *reader) uint32(field string) uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail("truncated at %s", field)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) uint64(field string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail("truncated at %s", field)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) raw(field string) []byte {
	n := r.uint32(field)
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail("truncated: %s of %d bytes, %d left", field, n, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) text(field string) string {
	v := r.raw(field)
	if r.err == nil && !utf8.Valid(v) {
		r.fail("%s is not UTF-8", field)
	}
	return string(v)
}

func (r *reader) bytes(field string) []byte {
	v := r.raw(field)
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}
