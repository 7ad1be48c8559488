package sink

import (
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

// cloudEventValue is ev's record value under EnvelopeCloudEventsStructured,
// unless it is larger than limit: then value is nil and n its size, found
// without building it (each form of the data measured before it is
// written, see cloudEventData).
func (s shape) cloudEventValue(ev *decode.Event, limit int) (value []byte, n int, fits bool) {
	source := s.cloudEventSource(ev)
	form, contentType := cloudEventData(ev.Payload, ev.ContentType)
	if n = cloudEventLen(ev, source, form, contentType); n > limit {
		return nil, n, false
	}
	return appendCloudEvent(make([]byte, 0, n), ev, source, form, contentType), n, true
}

// appendCloudEvent appends ev as a CloudEvents 1.0 JSON document (the JSON
// event format, structured mode): the same attributes binary mode sends as
// ce_* headers, then the payload as data or data_base64 in form (see
// cloudEventData), with its datacontenttype. Members come in a fixed
// order, data before datacontenttype; JSON readers, the CloudEvents SDKs
// among them, do not depend on the order.
func appendCloudEvent(dst []byte, ev *decode.Event, source string, form dataForm, contentType string) []byte {
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
	switch form {
	case formJSON:
		dst = appendCompacted(append(dst, `,"data":`...), ev.Payload)
	case formString:
		dst = appendString(append(dst, `,"data":`...), ev.Payload)
	default:
		dst = appendBase64(append(dst, `,"data_base64":`...), ev.Payload)
	}
	if contentType != "" {
		dst = append(dst, `,"datacontenttype":`...)
		dst = appendString(dst, contentType)
	}
	return append(dst, '}')
}

// cloudEventLen is the size of appendCloudEvent's document.
func cloudEventLen(ev *decode.Event, source string, form dataForm, contentType string) int {
	var tb [64]byte
	n := len(`{"specversion":"`+ceSpecVersion+`","id":`) + quotedLen(ev.ID) + len(`,"source":`) + quotedLen(source) +
		len(`,"type":`) + quotedLen(ev.EventType) + len(`,"time":""`) + len(ev.Time.UTC().AppendFormat(tb[:0], time.RFC3339Nano)) + len(`}`)
	if ev.AggregateID != "" {
		n += len(`,"subject":`) + len(`,"partitionkey":`) + 2*quotedLen(ev.AggregateID)
	}
	switch form {
	case formJSON:
		n += len(`,"data":`) + compactLen(ev.Payload)
	case formString:
		n += len(`,"data":`) + quotedLen(ev.Payload)
	default:
		n += len(`,"data_base64":`) + base64Len(len(ev.Payload))
	}
	if contentType != "" {
		n += len(`,"datacontenttype":`) + quotedLen(contentType)
	}
	return n
}

// dataForm is how a structured envelope writes a payload.
type dataForm uint8

const (
	formJSON   dataForm = iota // JSON, compacted
	formString                 // a JSON string of its text
	formBase64                 // a JSON string of its bytes in base64
)

// cloudEventData is the form of the payload in a CloudEvent, and its
// datacontenttype, as the JSON event format (3.1) wants them:
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
func cloudEventData(payload []byte, contentType string) (dataForm, string) {
	jsonType := isJSONType(contentType)
	if (jsonType || looksLikeDocument(payload)) && validJSON(payload) {
		if !jsonType {
			contentType = "application/json"
		}
		return formJSON, contentType
	}
	if isTextType(contentType) && utf8.Valid(payload) {
		return formString, contentType
	}
	return formBase64, contentType
}
