package sink

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// The connect-json envelope is what Kafka Connect's JsonConverter reads with
// schemas.enable=true: {"schema": a struct schema, "payload": its value}.
// The schema is the same for every event of a table (but for the payload
// field, see below), so a sink connector (JDBC, S3, BigQuery, …) reading it
// sees one table. The record key stays the aggregate id's bytes, not an
// envelope: read it with StringConverter (key.converter).
//
// Fields, in order:
//   - id (string), event_type (string): always set;
//   - aggregate_type, aggregate_id (optional string): null when empty (a
//     table without the column, a null key);
//   - payload (optional): a string, the payload's text byte for byte, when
//     the row's content type is JSON or text, or when its bytes (bytea) hold
//     a JSON object or array; Connect bytes (base64 in the JSON) for other
//     bytes or text that is not valid UTF-8. With Config.ConnectExpandPayload
//     a JSON payload is the JSON itself, with a schema inferred from it (see
//     expander), as Debezium's table.expand.json.payload does;
//   - timestamp (org.apache.kafka.connect.data.Timestamp: int64 epoch
//     milliseconds): the record's timestamp (Config.Timestamp).
const (
	connectSchemaHead = `{"schema":{"type":"struct","fields":[` +
		`{"type":"string","optional":false,"field":"id"},` +
		`{"type":"string","optional":true,"field":"aggregate_type"},` +
		`{"type":"string","optional":true,"field":"aggregate_id"},` +
		`{"type":"string","optional":false,"field":"event_type"},`
	connectSchemaTail = `,{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"timestamp"}` +
		`],"optional":false,"name":"` + ConnectSchemaName + `"},"payload":{"id":`
	connectPayloadString = `{"type":"string","optional":true,"field":"payload"}`
	connectPayloadBytes  = `{"type":"bytes","optional":true,"field":"payload"}`
)

// ConnectSchemaName names the connect-json envelope's struct schema (a
// valid Avro full name, should a sink convert it).
const ConnectSchemaName = "outbox_cdc.Event"

// connectValue is ev's record value under EnvelopeConnectJSON, unless it
// is larger than limit: then value is nil and n its size (the string or
// bytes form's), found without building it.
func (s shape) connectValue(ev *decode.Event, limit int) (value []byte, n int, fits bool) {
	ts := s.recordTime(ev)
	if s.expand && (isJSONType(ev.ContentType) || looksLikeDocument(ev.Payload)) {
		if v, ok := appendConnectExpanded(ev, ts, limit); ok {
			return v, len(v), true
		}
	}
	text := connectText(ev.Payload, ev.ContentType)
	if n = connectLen(ev, ts, text); n > limit {
		return nil, n, false
	}
	return appendConnect(make([]byte, 0, n), ev, ts, text), n, true
}

// appendConnect appends ev in the connect-json envelope with the payload a
// string (text, see connectText) or bytes.
func appendConnect(dst []byte, ev *decode.Event, ts time.Time, text bool) []byte {
	dst = append(dst, connectSchemaHead...)
	if text {
		dst = append(dst, connectPayloadString...)
	} else {
		dst = append(dst, connectPayloadBytes...)
	}
	dst = append(dst, connectSchemaTail...)
	dst = appendConnectFields(dst, ev, ts)
	switch {
	case ev.Payload == nil: // NULL (the field is optional), not an empty string
		dst = append(dst, "null"...)
	case text:
		dst = appendString(dst, ev.Payload)
	default:
		dst = appendBase64(dst, ev.Payload)
	}
	return append(dst, '}', '}')
}

// connectLen is the size of appendConnect's envelope.
func connectLen(ev *decode.Event, ts time.Time, text bool) int {
	n := len(connectSchemaHead) + len(connectPayloadBytes) + len(connectSchemaTail) + connectFieldsLen(ev, ts) + len(`}}`)
	if text {
		n += len(connectPayloadString) - len(connectPayloadBytes)
	}
	switch {
	case ev.Payload == nil:
		n += len("null")
	case text:
		n += quotedLen(ev.Payload)
	default:
		n += base64Len(len(ev.Payload))
	}
	return n
}

// connectText says whether a payload goes as a Connect string: text or
// JSON by its column's type, or bytes holding a JSON document; always in
// valid UTF-8, which a JSON string must be to hold it byte for byte.
func connectText(payload []byte, contentType string) bool {
	if !utf8.Valid(payload) {
		return false
	}
	if isJSONType(contentType) || isTextType(contentType) {
		return true
	}
	return looksLikeDocument(payload) && json.Valid(payload)
}

// appendConnectFields appends the struct's values but the payload's, after
// connectSchemaTail's {"id":, up to "payload": included.
func appendConnectFields(dst []byte, ev *decode.Event, ts time.Time) []byte {
	dst = appendString(dst, ev.ID)
	dst = append(dst, `,"aggregate_type":`...)
	dst = appendOptionalString(dst, ev.AggregateType)
	dst = append(dst, `,"aggregate_id":`...)
	dst = appendOptionalString(dst, ev.AggregateID)
	dst = append(dst, `,"event_type":`...)
	dst = appendString(dst, ev.EventType)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, ts.UnixMilli(), 10)
	return append(dst, `,"payload":`...)
}

func appendOptionalString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// connectFieldsLen is the size of appendConnectFields' output.
func connectFieldsLen(ev *decode.Event, ts time.Time) int {
	var digits [24]byte
	return quotedLen(ev.ID) + len(`,"aggregate_type":`) + optionalLen(ev.AggregateType) + len(`,"aggregate_id":`) +
		optionalLen(ev.AggregateID) + len(`,"event_type":`) + quotedLen(ev.EventType) + len(`,"timestamp":`) +
		len(strconv.AppendInt(digits[:0], ts.UnixMilli(), 10)) + len(`,"payload":`)
}

func optionalLen(s string) int {
	if s == "" {
		return len("null")
	}
	return quotedLen(s)
}

// expanders are reused: an expansion needs a compacted copy of the payload
// and a node per place in its schema, which would otherwise be garbage per
// event.
var expanders = sync.Pool{New: func() any { return new(expander) }}

// maxPooledBytes keeps a rare huge payload's buffers out of the pool.
const maxPooledBytes = 1 << 20

// appendConnectExpanded returns ev in the connect-json envelope with the
// payload expanded: its schema inferred, its value the JSON, compacted.
// ok is false when the payload is not valid JSON, its schema cannot be
// inferred (see expander), or the envelope would be larger than limit:
// the event then goes with the payload as a string, and its schema says
// so. What cannot fit is found before the payload is copied (its
// compacted size), or while the schema is inferred and written, each
// bounded by limit (see expander.maxNodes and appendSchema).
func appendConnectExpanded(ev *decode.Event, ts time.Time, limit int) (_ []byte, ok bool) {
	if !validJSON(ev.Payload) {
		return nil, false
	}
	head := len(connectSchemaHead) + len(connectSchemaTail) + connectFieldsLen(ev, ts) + len(`}}`)
	size := compactLen(ev.Payload)
	if head+size+len(connectPayloadString) > limit {
		return nil, false
	}
	x := expanders.Get().(*expander)
	defer func() {
		if cap(x.doc) <= maxPooledBytes && cap(x.nodes) <= maxPooledBytes/8 {
			x.doc = x.doc[:0]
			expanders.Put(x)
		}
	}()
	x.doc = appendCompacted(slices.Grow(x.doc[:0], size), ev.Payload)
	x.maxNodes = (limit - head - size) / minSchemaBytes
	root, ok := x.infer(x.doc)
	if !ok {
		return nil, false
	}
	dst := make([]byte, 0, min(head+size+48*len(x.nodes), limit))
	dst = append(dst, connectSchemaHead...)
	x.limit = limit - (head - len(connectSchemaHead)) - size
	if dst, ok = x.appendSchema(dst, root, []byte(`"payload"`)); !ok || len(dst) > x.limit {
		return nil, false
	}
	dst = append(dst, connectSchemaTail...)
	dst = appendConnectFields(dst, ev, ts)
	dst = append(dst, x.doc...)
	return append(dst, '}', '}'), true
}
