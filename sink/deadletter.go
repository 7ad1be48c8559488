package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// A dead letter is the outbox row that could not be published, sent to the
// dead-letter topic keyed as it would have been (aggregate id, else event
// id), with the payload as its value when it fits, and these headers:
const (
	HeaderReason    = "outbox_cdc.reason"    // a short code, such as message_too_large
	HeaderError     = "outbox_cdc.error"     // the full reason, for people
	HeaderTable     = "outbox_cdc.table"     // schema.table of the outbox row
	HeaderLSN       = "outbox_cdc.lsn"       // commit LSN of the row's transaction
	HeaderTopic     = "outbox_cdc.topic"     // the topic it was routed to, when known
	HeaderColumn    = "outbox_cdc.column."   // prefix: a column of a row that did not decode, as text
	HeaderNull      = "outbox_cdc.null"      // comma-separated NULL columns of such a row
	HeaderTruncated = "outbox_cdc.truncated" // "value" or "value,headers": left out to fit
	// HeaderValueBytes is the left-out value's size, when truncated; for
	// a value too large to be built (see shape.value), its size or a lower
	// bound of it: connect-json's without expanding the payload, or, for
	// a structured envelope's payload that cannot fit in any form, its
	// smallest form's (valueFloor).
	HeaderValueBytes = "outbox_cdc.value_bytes"
	// HeaderPartition is the partition the row's partition column named
	// (--column-partition), as its text, only when it named one: a replay
	// (package dlq) sends the event there, not to its key's partition.
	HeaderPartition = "outbox_cdc.partition"
	// HeaderNullKey ("true") says the event had a null key: its dead
	// letter is keyed by its id instead (a record of the dead-letter topic
	// keyed by nothing would land anywhere), and a replay (package dlq)
	// publishes it with a null key again.
	HeaderNullKey = "outbox_cdc.null_key"
)

// DeadLetterRow dead-letters a row that did not decode into an event, under
// token. Without a dead-letter topic it returns rowErr: the stream stops
// there, without confirming the row.
func (w *Writer) DeadLetterRow(ctx context.Context, rowErr *decode.InvalidRowError, token uint64) error {
	if w.letters.topic == "" {
		return rowErr
	}
	msg, id := deadLetterOfRow(rowErr)
	return w.sendDeadLetter(ctx, msg, token, rowErr.CommitLSN, rowErr.Table, id, rowErr.Reason, rowErr.Detail)
}

// letters builds dead letters: the row or event that could not be
// published, keyed as it would have been, with headers that say why, cut
// to fit. Immutable and without I/O: the writer sends what it builds
// (sendDeadLetter), and salvage what it refits.
type letters struct {
	topic    string // Config.DeadLetterTopic; empty: nothing is dead-lettered
	maxBytes int    // Config.MaxMessageBytes
	shape    shape
}

// deadLetterOfRow is the dead letter of a row that did not decode, with its id.
func deadLetterOfRow(rowErr *decode.InvalidRowError) (producer.Outgoing, string) {
	msg := producer.Outgoing{Headers: deadLetterHeaders(rowErr.Reason, rowErr.Detail, rowErr.Table, rowErr.CommitLSN, "", "")}
	var nulls []string
	for _, c := range rowErr.Columns {
		switch {
		case c.Null:
			nulls = append(nulls, c.Name)
		case c.Name == rowErr.Mapping.Payload:
			msg.Value = c.Value
		case c.Name == rowErr.Mapping.ID:
			msg.Headers = append(msg.Headers, producer.Header{Key: "id", Value: c.Value})
		case c.Name == rowErr.Mapping.EventType:
			msg.Headers = append(msg.Headers, producer.Header{Key: "event_type", Value: c.Value})
		case c.Name == rowErr.Mapping.AggregateType:
			msg.Headers = append(msg.Headers, producer.Header{Key: "aggregate_type", Value: c.Value})
		case c.Name == rowErr.Mapping.Partition && rowErr.Mapping.Partition != "":
			// as an event's dead letter carries it, for a replay to honour
			msg.Headers = append(msg.Headers, producer.Header{Key: HeaderPartition, Value: c.Value})
		default:
			msg.Headers = append(msg.Headers, producer.Header{Key: HeaderColumn + c.Name, Value: c.Value})
		}
	}
	if len(nulls) > 0 {
		msg.Headers = append(msg.Headers, producer.Header{Key: HeaderNull, Value: []byte(strings.Join(nulls, ","))})
	}
	id, _ := rowErr.Column(rowErr.Mapping.ID)
	if v, ok := rowErr.Column(rowErr.Mapping.AggregateID); ok && len(v) > 0 {
		msg.Key = v
	} else {
		msg.Key = id
	}
	return msg, string(id)
}

// deadLetterEvent dead-letters an event that decoded but cannot be
// published, with extra headers that say more of why (a contract's
// location), or returns perr without a dead-letter topic.
func (w *Writer) deadLetterEvent(ctx context.Context, ev *decode.Event, topic string, token uint64, perr *Error, extra ...producer.Header) error {
	if w.letters.topic == "" {
		return perr
	}
	msg := w.letters.ofEvent(ev, topic, perr, extra...)
	return w.sendDeadLetter(ctx, msg, token, ev.CommitLSN, ev.Table, ev.ID, perr.Reason, perr.Err.Error())
}

// ofEvent is the dead letter of ev, routed to topic, refused with perr.
// It carries the headers the event would have had, envelope included, so
// that a replay (package dlq) publishes it as it would have been, and its
// value when it fits --max-message-bytes; one that does not is not built
// (fit would leave it out), and its dead letter says so.
func (l letters) ofEvent(ev *decode.Event, topic string, perr *Error, extra ...producer.Header) producer.Outgoing {
	value, n, fits := l.shape.deadLetterValue(ev)
	msg := l.withoutValueOf(ev, topic, perr, extra...)
	if !fits {
		return withoutValue(msg, n)
	}
	msg.Value = value
	return msg
}

// withoutValueOf is ofEvent's dead letter before its value is set. A
// null-key event's is keyed by its id, and says so (HeaderNullKey) among
// the relay's own headers, before the row's, so that a replay restores
// the null key.
func (l letters) withoutValueOf(ev *decode.Event, topic string, perr *Error, extra ...producer.Header) producer.Outgoing {
	msg := producer.Outgoing{Key: []byte(ev.AggregateID), Time: ev.Time}
	own := deadLetterHeaders(perr.Reason, perr.Err.Error(), ev.Table, ev.CommitLSN, topic, ev.Partition)
	if len(msg.Key) == 0 {
		msg.Key = []byte(ev.ID)
		own = append(own, producer.Header{Key: HeaderNullKey, Value: []byte("true")})
	}
	msg.Headers = append(append(own, extra...), l.shape.headers(ev)...)
	return msg
}

// deadLetterTooLarge dead-letters ev, whose record exceeds
// --max-message-bytes (detail says by how much), without its value of
// valueSize bytes, which is not built again (and may never have been:
// see shape.value), or returns the refusal without a dead-letter topic.
func (w *Writer) deadLetterTooLarge(ctx context.Context, ev *decode.Event, topic string, token uint64, detail error, valueSize int) error {
	perr := &Error{Topic: topic, Reason: ReasonMessageTooLarge, Err: detail}
	if w.letters.topic == "" {
		return perr
	}
	msg := withoutValue(w.letters.withoutValueOf(ev, topic, perr), valueSize)
	return w.sendDeadLetter(ctx, msg, token, ev.CommitLSN, ev.Table, ev.ID, perr.Reason, perr.Err.Error())
}

// deadLetterOfMessage is the dead letter of a message the broker refused.
func deadLetterOfMessage(m *producer.Outgoing, perr *Error, table string, lsn pglogrepl.LSN) producer.Outgoing {
	dl := producer.Outgoing{Key: m.Key, Value: m.Value, Time: m.Time}
	dl.Headers = append(deadLetterHeaders(perr.Reason, perr.Err.Error(), table, lsn, m.Topic, m.Partition), m.Headers...)
	return dl
}

// deadLetterHeaders are the headers that describe a dead letter; topic
// and partition (the row's partition column) are left out when empty.
func deadLetterHeaders(reason, detail, table string, lsn pglogrepl.LSN, topic, partition string) []producer.Header {
	hs := []producer.Header{
		{Key: HeaderReason, Value: []byte(reason)},
		{Key: HeaderError, Value: []byte(detail)},
		{Key: HeaderTable, Value: []byte(table)},
		{Key: HeaderLSN, Value: []byte(lsn.String())},
	}
	if topic != "" {
		hs = append(hs, producer.Header{Key: HeaderTopic, Value: []byte(topic)})
	}
	if partition != "" {
		hs = append(hs, producer.Header{Key: HeaderPartition, Value: []byte(partition)})
	}
	return hs
}

// sendDeadLetter hands a dead letter to the async writer under token. A
// dead-letter topic that cannot take it fails the stream: there is nowhere
// else to put the row.
func (w *Writer) sendDeadLetter(ctx context.Context, msg producer.Outgoing, token uint64, lsn pglogrepl.LSN, table, id, reason, detail string) error {
	msg = w.letters.fit(msg)
	msg.Topic = w.letters.topic
	msg.Token, msg.Reason, msg.Meta = token, reason, eventMeta{lsn: lsn, table: table}
	if err := w.engine.Produce(ctx, msg); err != nil {
		var perr *Error
		if errors.As(err, &perr) && perr.Reason != "" {
			return &Error{Topic: msg.Topic, Err: fmt.Errorf("dead-letter topic refused the row %s (%s: %s): %w", id, reason, detail, perr.Err)}
		}
		return err
	}
	w.deadLetter.Add(1)
	w.cfg.Observer.DeadLettered(reason)
	w.log.Warn("dead-lettered an outbox row", slog.String("id", id), slog.String("reason", reason), slog.String("err", detail),
		slog.String("lsn", lsn.String()), slog.String("dead_letter_topic", msg.Topic), slog.Int64("dead_lettered_total", w.deadLetter.Load()))
	return nil
}

// deadLetterRoom is what DeadLetterKeepsValue leaves for a dead letter's
// own headers (reason, table, position) beside the event's.
const deadLetterRoom = 4 << 10

// DeadLetterKeepsValue reports whether a dead letter of ev, had it been
// dead-lettered, surely carried ev's value: with a dead-letter topic, it
// fits --max-message-bytes with room for the dead letter's headers and for
// an error that quotes the value whole (a contract's pattern does). When
// not (fit sends it without its value), ev's row may be the only full copy
// of ev, which a row cleaned without publishing (exactly-once's restart
// behind its checkpoint) must not be. Without a dead-letter topic nothing
// is dead-lettered.
func (w *Writer) DeadLetterKeepsValue(ev *decode.Event) bool { return w.letters.keepsValue(ev) }

func (l letters) keepsValue(ev *decode.Event) bool {
	if l.topic == "" {
		return true
	}
	value, _, fits := l.shape.deadLetterValue(ev)
	if !fits {
		return false
	}
	m := producer.Outgoing{Key: []byte(ev.AggregateID), Value: value, Headers: l.shape.headers(ev)}
	if len(m.Key) == 0 {
		m.Key = []byte(ev.ID)
	}
	return m.Size()+len(m.Value)+deadLetterRoom <= l.maxBytes
}

// refusals answers the engine (producer.DeadLetters) when the brokers
// refuse a record for what it is: its dead letter, built here, where
// envelopes are known; none without a dead-letter topic.
type refusals struct{ w *Writer }

// Letter returns the dead letter of rec, refused for one: for rec a dead
// letter itself, rec without its value (it was counted once, when it was
// decided); else rec's own, cut to fit, to the dead-letter topic.
func (r refusals) Letter(rec producer.Outgoing, one *Error) (producer.Outgoing, bool) {
	l := r.w.letters
	if l.topic == "" {
		return producer.Outgoing{}, false
	}
	if rec.Reason != "" {
		return withoutValue(rec, len(rec.Value)), true
	}
	m, _ := rec.Meta.(eventMeta)
	dl := l.fit(deadLetterOfMessage(&rec, one, m.table, m.lsn))
	dl.Topic = l.topic
	return dl, true
}

// Lettered counts the dead letter of rec once it is written.
func (r refusals) Lettered(rec, letter producer.Outgoing, one *Error) {
	r.w.counted(rec.Topic, string(letter.Key), one)
}

// counted records a dead letter written by salvage.
func (w *Writer) counted(topic, key string, perr *Error) {
	w.deadLetter.Add(1)
	w.cfg.Observer.DeadLettered(perr.Reason)
	w.log.Warn("dead-lettered a message the broker refused", slog.String("topic", topic), slog.String("key", key),
		slog.String("reason", perr.Reason), slog.Any("err", perr.Err), slog.String("dead_letter_topic", w.cfg.DeadLetterTopic),
		slog.Int64("dead_lettered_total", w.deadLetter.Load()))
}

// fit makes a dead letter fit MaxMessageBytes: first the value is left out,
// then every header but the dead-letter ones, then the error text is cut.
// What is left out is named in HeaderTruncated; the row itself is still in
// the outbox table unless it was deleted.
func (l letters) fit(m producer.Outgoing) producer.Outgoing {
	limit := l.maxBytes
	if m.Size() <= limit {
		return m
	}
	if !slices.ContainsFunc(m.Headers, func(h producer.Header) bool { return h.Key == HeaderTruncated }) { // else left out already
		m = withoutValue(m, len(m.Value))
	}
	if m.Size() <= limit {
		return m
	}
	kept := m.Headers[:0:0]
	for _, h := range m.Headers {
		switch {
		case h.Key == HeaderTruncated:
			kept = append(kept, producer.Header{Key: h.Key, Value: []byte("value,headers")})
		case h.Key == "id" || strings.HasPrefix(h.Key, "outbox_cdc.") && !strings.HasPrefix(h.Key, HeaderColumn):
			if h.Key == HeaderError && len(h.Value) > 1024 {
				h.Value = h.Value[:1024]
			}
			kept = append(kept, h)
		}
	}
	m.Headers = kept
	if len(m.Key) > 1024 {
		m.Key = m.Key[:1024]
	}
	return m
}

// withoutValue returns m with its value, of size bytes, left out, and
// says so in headers.
func withoutValue(m producer.Outgoing, size int) producer.Outgoing {
	m.Headers = append(m.Headers[:len(m.Headers):len(m.Headers)],
		producer.Header{Key: HeaderValueBytes, Value: []byte(strconv.Itoa(size))},
		producer.Header{Key: HeaderTruncated, Value: []byte("value")})
	m.Value = nil
	return m
}
