package decode

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// event maps a tuple of this outbox relation to an Event that owns its bytes.
func (r *relation) event(t *tuple) (Event, error) {
	if r.err != nil {
		return Event{}, r.invalid(t, "", ReasonUnmappedTable, r.err.Error())
	}
	ev, payload, reason, detail := r.required(t)
	if reason != "" {
		return Event{}, r.invalid(t, ev.ID, reason, detail)
	}
	switch {
	case ev.Tombstone: // no payload: a null value
	case r.columns[r.payload].DataType == oidBytea:
		var err error
		if ev.Payload, err = unhexBytea(payload); err != nil {
			return Event{}, r.invalid(t, ev.ID, ReasonInvalidBytea, err.Error())
		}
	default:
		ev.Payload = bytes.Clone(payload)
	}
	if r.headers >= 0 && t.kind[r.headers] != pglogrepl.TupleDataTypeNull {
		var err error
		if ev.Headers, err = parseHeaders(t.data[r.headers]); err != nil {
			return Event{}, r.invalid(t, ev.ID, ReasonInvalidHeaders, fmt.Sprintf("column %q: %v", r.columns[r.headers].Name, err))
		}
	}
	for k, j := range r.extra {
		v, ok, reason, detail := r.optional(t, j)
		if reason != "" {
			return Event{}, r.invalid(t, ev.ID, reason, detail)
		}
		if ok {
			ev.Headers = append(ev.Headers, Header{Key: r.cols.HeaderColumns[k].Name(), Value: bytes.Clone(v)})
		}
	}
	if r.part >= 0 {
		v, _, reason, detail := r.optional(t, r.part)
		if reason != "" {
			return Event{}, r.invalid(t, ev.ID, reason, detail)
		}
		ev.Partition = string(v) // whether it is a partition of the topic, sink says
	}
	ev.ContentType = r.contentType
	if r.ts >= 0 && t.kind[r.ts] == pglogrepl.TupleDataTypeText {
		ev.Time, _ = parseTimestamp(string(t.data[r.ts])) // unreadable or infinite: commit time
	}
	return ev, nil
}

// required reads the columns every event has (id, aggregate type, key,
// event type, payload) and those the topic template names, or says why
// one cannot be read. payload is the payload column's text (nil for a
// tombstone).
func (r *relation) required(t *tuple) (ev Event, payload []byte, reason, detail string) {
	text := func(i int, dst *string) {
		if reason == "" {
			var b []byte
			if b, reason, detail = r.value(t, i); reason == "" {
				*dst = string(b)
			}
		}
	}
	text(r.id, &ev.ID)
	if r.aggType >= 0 {
		text(r.aggType, &ev.AggregateType)
	}
	if r.aggID >= 0 && !(r.cols.NullKey && t.kind[r.aggID] == pglogrepl.TupleDataTypeNull) {
		text(r.aggID, &ev.AggregateID)
	}
	text(r.evType, &ev.EventType)
	if reason == "" {
		payload, reason, detail = r.payloadOf(t, &ev)
	}
	if reason == "" && r.aggID >= 0 && ev.AggregateID == "" && !r.cols.NullKey {
		reason, detail = ReasonEmptyAggregateID, fmt.Sprintf("column %q is empty; it is the Kafka message key (--null-key=allow gives such rows a null key)", r.columns[r.aggID].Name)
	}
	for k, j := range r.fields {
		if reason != "" {
			break
		}
		if ev.Fields == nil {
			ev.Fields = make(map[string]string, len(r.fields))
		}
		var v []byte
		if v, _, reason, detail = r.optional(t, j); reason == "" {
			ev.Fields[r.cols.TopicColumns[k]] = string(v) // NULL as empty
		}
	}
	return ev, payload, reason, detail
}

// payloadOf returns the payload column's text. A NULL payload is a
// tombstone (ev.Tombstone) under NullPayloadTombstone when ev has a key,
// and otherwise invalid, as it always was.
func (r *relation) payloadOf(t *tuple, ev *Event) ([]byte, string, string) {
	if t.kind[r.payload] != pglogrepl.TupleDataTypeNull || r.cols.NullPayload != NullPayloadTombstone {
		return r.value(t, r.payload)
	}
	if ev.AggregateID == "" {
		return nil, ReasonNullColumn, fmt.Sprintf("column %q is NULL, and the row has no key to make it a tombstone of (--null-payload=tombstone needs a key)", r.columns[r.payload].Name)
	}
	ev.Tombstone = true
	return nil, "", ""
}

// optional returns the text of column i and whether it is not NULL, or why
// it cannot be read (binary, or an unchanged TOAST value).
func (r *relation) optional(t *tuple, i int) (v []byte, ok bool, reason, detail string) {
	if t.kind[i] == pglogrepl.TupleDataTypeNull {
		return nil, false, "", ""
	}
	v, reason, detail = r.value(t, i)
	return v, reason == "", reason, detail
}

// invalid returns the error for a row that cannot become an event, with a
// copy of every column so that it can be dead-lettered whole.
func (r *relation) invalid(t *tuple, id, reason, detail string) *InvalidRowError {
	e := &InvalidRowError{Table: r.name, ID: id, Reason: reason, Detail: detail, Columns: make([]Column, len(r.columns))}
	for i, c := range r.columns {
		e.Columns[i] = Column{Name: c.Name, Null: t.kind[i] != pglogrepl.TupleDataTypeText && t.kind[i] != pglogrepl.TupleDataTypeBinary}
		if !e.Columns[i].Null {
			e.Columns[i].Value = bytes.Clone(t.data[i])
		}
	}
	return e
}

// value returns the text of column i, which must be present and not NULL,
// or why it is not.
func (r *relation) value(t *tuple, i int) (b []byte, reason, detail string) {
	name := r.columns[i].Name
	switch t.kind[i] {
	case pglogrepl.TupleDataTypeText:
		return t.data[i], "", ""
	case pglogrepl.TupleDataTypeNull:
		return nil, ReasonNullColumn, fmt.Sprintf("column %q is NULL", name)
	case pglogrepl.TupleDataTypeToast:
		return nil, ReasonUnreadableColumn, fmt.Sprintf("column %q is an unchanged TOAST value, not sent", name)
	default:
		return nil, ReasonUnreadableColumn, fmt.Sprintf("column %q arrived in binary format; outbox-cdc reads text", name)
	}
}

// unhexBytea decodes bytea's text output in hex format (\x0a0b...).
func unhexBytea(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(`\x`)) {
		return nil, fmt.Errorf("bytea payload not in hex format (set bytea_output = 'hex')")
	}
	out := make([]byte, hex.DecodedLen(len(b)-2))
	if _, err := hex.Decode(out, b[2:]); err != nil {
		return nil, fmt.Errorf("bytea payload: %w", err)
	}
	return out, nil
}

// reservedHeaders are set from the outbox columns; a member of the headers
// column with one of these names is left out so that consumers see one value.
var reservedHeaders = map[string]bool{"id": true, "event_type": true, "aggregate_type": true}

// parseHeaders turns a JSON object into headers: a string member gives its
// value, null is left out, and any other value gives its JSON text.
func parseHeaders(b []byte) ([]Header, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !reservedHeaders[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	hs := make([]Header, 0, len(keys))
	for _, k := range keys {
		raw := m[k]
		switch {
		case string(raw) == "null":
			continue
		case strings.HasPrefix(string(raw), `"`):
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("member %q: %w", k, err)
			}
			hs = append(hs, Header{Key: k, Value: []byte(s)})
		default:
			hs = append(hs, Header{Key: k, Value: bytes.Clone(raw)})
		}
	}
	return hs, nil
}

// timestampLayouts are the text forms of timestamptz and timestamp with
// DateStyle ISO; the replication connection sets it, and TimeZone UTC.
var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07:00:00",
	"2006-01-02 15:04:05.999999999",
}

func parseTimestamp(s string) (time.Time, error) {
	for _, layout := range timestampLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("unreadable timestamp %q", s)
}
