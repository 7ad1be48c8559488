package sink

import (
	"encoding/base64"
	"encoding/json"
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

// connectValue is ev's record value under EnvelopeConnectJSON.
func (s shape) connectValue(ev *decode.Event) []byte {
	ts := s.recordTime(ev)
	if s.expand && (isJSONType(ev.ContentType) || looksLikeDocument(ev.Payload)) {
		if v, ok := appendConnectExpanded(nil, ev, ts); ok {
			return v
		}
	}
	return appendConnect(make([]byte, 0, connectSize(ev)), ev, ts)
}

// appendConnect appends ev in the connect-json envelope with the payload a
// string or bytes.
func appendConnect(dst []byte, ev *decode.Event, ts time.Time) []byte {
	text := connectText(ev.Payload, ev.ContentType)
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

// connectSize is room enough for most events' envelopes.
func connectSize(ev *decode.Event) int {
	return len(connectSchemaHead) + len(connectPayloadString) + len(connectSchemaTail) + 96 +
		len(ev.ID) + len(ev.AggregateType) + len(ev.AggregateID) + len(ev.EventType) +
		base64.StdEncoding.EncodedLen(len(ev.Payload))
}

// expanders are reused: an expansion needs a compacted copy of the payload
// and a node per JSON value, which would otherwise be garbage per event.
var expanders = sync.Pool{New: func() any { return new(expander) }}

// maxPooledBytes keeps a rare huge payload's buffers out of the pool.
const maxPooledBytes = 1 << 20

// appendConnectExpanded appends ev in the connect-json envelope with the
// payload expanded: its schema inferred, its value the JSON, compacted.
// ok is false, and dst unchanged, when the payload is not valid JSON or
// its schema cannot be inferred (see expander): the event then goes with
// the payload as a string, and its schema says so.
func appendConnectExpanded(dst []byte, ev *decode.Event, ts time.Time) (_ []byte, ok bool) {
	x := expanders.Get().(*expander)
	defer func() {
		if cap(x.doc) <= maxPooledBytes && cap(x.nodes) <= maxPooledBytes/8 {
			x.doc = x.doc[:0]
			expanders.Put(x)
		}
	}()
	if x.doc, ok = appendCompact(x.doc[:0], ev.Payload); !ok {
		return dst, false
	}
	root, ok := x.infer(x.doc)
	if !ok {
		return dst, false
	}
	if dst == nil {
		dst = make([]byte, 0, connectSize(ev)+len(x.doc)+64*len(x.nodes))
	}
	mark := len(dst)
	dst = append(dst, connectSchemaHead...)
	if dst, ok = x.appendSchema(dst, root, []byte(`"payload"`)); !ok {
		return dst[:mark], false
	}
	dst = append(dst, connectSchemaTail...)
	dst = appendConnectFields(dst, ev, ts)
	dst = append(dst, x.doc...)
	return append(dst, '}', '}'), true
}
