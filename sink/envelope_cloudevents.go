package sink

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// ContentTypeCloudEvents is the content-type header of a record under
// EnvelopeCloudEventsStructured: the CloudEvents Kafka protocol binding
// (3.3) tells a structured-mode record by it.
const ContentTypeCloudEvents = "application/cloudevents+json; charset=UTF-8"

var contentTypeCloudEvents = []byte(ContentTypeCloudEvents) // shared, never written

// cloudEventSource is the CloudEvents source of ev, in either mode:
// Config.CloudEventsSource, or /outbox-cdc/ and the table.
func (s shape) cloudEventSource(ev *decode.Event) string {
	if s.source != "" {
		return s.source
	}
	return "/outbox-cdc/" + ev.Table
}

// appendCloudEvent appends ev as a CloudEvents 1.0 JSON document (the JSON
// event format, structured mode): the same attributes binary mode sends as
// ce_* headers, then the payload as data or data_base64 (see
// appendCloudEventData), with its datacontenttype. Members come in a fixed
// order, data before datacontenttype; JSON readers, the CloudEvents SDKs
// among them, do not depend on the order.
func appendCloudEvent(dst []byte, ev *decode.Event, source string) []byte {
	dst = append(dst, `{"specversion":"`+ceSpecVersion+`","id":`...)
	dst = appendString(dst, ev.ID)
	dst = append(dst, `,"source":`...)
	dst = appendString(dst, source)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, ev.EventType)
	dst = append(dst, `,"time":"`...)
	dst = ev.Time.UTC().AppendFormat(dst, time.RFC3339Nano) // nothing in it needs escaping
	dst = append(dst, '"')
	if ev.AggregateID != "" { // a null key has neither, as in binary mode
		dst = append(dst, `,"subject":`...)
		dst = appendString(dst, ev.AggregateID)
		dst = append(dst, `,"partitionkey":`...)
		dst = appendString(dst, ev.AggregateID)
	}
	dst = appendCloudEventData(dst, ev.Payload, ev.ContentType)
	return append(dst, '}')
}

// appendCloudEventData appends the payload and its datacontenttype as the
// JSON event format (3.1) wants them:
//   - a payload of a JSON column (json, jsonb; a message whose content type
//     is application/json or ends in +json) that is valid JSON goes in data
//     as JSON, compacted, its datacontenttype the row's;
//   - a payload of another column (text, varchar, bytea) that holds a JSON
//     object or array goes in data as JSON too, and its datacontenttype is
//     application/json, so that a CloudEvents SDK reads data as JSON
//     rather than as text or bytes (a bare scalar such as 42 stays text);
//   - other text (text/*) in valid UTF-8 goes in data as a JSON string;
//   - anything else (bytes, invalid JSON or UTF-8) goes in data_base64,
//     with the row's datacontenttype.
//
// An empty content type leaves datacontenttype out, as the format asks.
func appendCloudEventData(dst, payload []byte, contentType string) []byte {
	jsonType := isJSONType(contentType)
	if jsonType || looksLikeDocument(payload) {
		mark := len(dst)
		if out, ok := appendCompact(append(dst, `,"data":`...), payload); ok {
			if !jsonType {
				contentType = "application/json"
			}
			return appendDataContentType(out, contentType)
		}
		dst = dst[:mark]
	}
	if isTextType(contentType) && utf8.Valid(payload) {
		dst = append(dst, `,"data":`...)
		dst = appendString(dst, payload)
	} else {
		dst = append(dst, `,"data_base64":`...)
		dst = appendBase64(dst, payload)
	}
	return appendDataContentType(dst, contentType)
}

func appendDataContentType(dst []byte, contentType string) []byte {
	if contentType == "" {
		return dst
	}
	dst = append(dst, `,"datacontenttype":`...)
	return appendString(dst, contentType)
}

// cloudEventSize is room enough for most events' documents: their strings
// unescaped and the payload as base64 (compact JSON is never longer).
func cloudEventSize(ev *decode.Event, source string) int {
	return 160 + len(ev.ID) + len(source) + len(ev.EventType) + 2*len(ev.AggregateID) +
		len(ev.ContentType) + base64.StdEncoding.EncodedLen(len(ev.Payload))
}
