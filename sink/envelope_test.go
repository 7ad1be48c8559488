package sink

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Content types as decode sets them, by the payload column's type.
const (
	ctJSON  = "application/json"
	ctText  = "text/plain; charset=utf-8"
	ctBytes = "application/octet-stream"
)

var envelopeTime = time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC)

func envelopeEvent(payload, contentType string) *decode.Event {
	return &decode.Event{ID: "e-1", AggregateType: "order", AggregateID: "o-7", EventType: "order.placed",
		Payload: []byte(payload), ContentType: contentType, Time: envelopeTime, CommitTime: envelopeTime.Add(time.Second),
		Table: "public.outbox"}
}

// decodeObject parses a record value, failing the test unless it is one
// JSON object.
func decodeObject(t *testing.T, value []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(value, &m); err != nil {
		t.Fatalf("value is not a JSON object: %v\n%s", err, value)
	}
	return m
}

// TestCloudEventStructured: the attributes binary mode sends as headers,
// and the payload as data (JSON, or a JSON string for text) or data_base64,
// as appendCloudEventData says.
func TestCloudEventStructured(t *testing.T) {
	cases := []struct {
		name, payload, contentType string
		data, dataBase64           string // the member expected, as JSON; "" absent
		wantType                   string // datacontenttype; "" absent
	}{
		{"jsonb object", `{"total": 12.5, "lines": [1, 2]}`, ctJSON, `{"total":12.5,"lines":[1,2]}`, "", ctJSON},
		{"jsonb scalar", `42`, ctJSON, `42`, "", ctJSON},
		{"jsonb string", `"a\u00e9\n"`, ctJSON, `"a\u00e9\n"`, "", ctJSON},
		{"text holding an object", " {\"a\": [true, null]}\n", ctText, `{"a":[true,null]}`, "", ctJSON},
		{"text holding an array", `[1,"x"]`, ctText, `[1,"x"]`, "", ctJSON},
		{"text scalar stays text", `42`, ctText, `"42"`, "", ctText},
		{"plain text", "héllo \"world\"\t\x01", ctText, `"héllo \"world\"\t\u0001"`, "", ctText},
		{"text that only looks like JSON", `{not json`, ctText, `"{not json"`, "", ctText},
		{"empty text", ``, ctText, `""`, "", ctText},
		{"bytea holding JSON", `{"k":"v"}`, ctBytes, `{"k":"v"}`, "", ctJSON},
		{"bytea binary", "\x00\xff\xfe{", ctBytes, "", `"` + base64.StdEncoding.EncodeToString([]byte("\x00\xff\xfe{")) + `"`, ctBytes},
		{"empty bytea", ``, ctBytes, "", `""`, ctBytes},
		{"text not UTF-8", "caf\xe9", ctText, "", `"` + base64.StdEncoding.EncodeToString([]byte("caf\xe9")) + `"`, ctText},
		{"JSON type, invalid JSON", `{"a":`, ctJSON, "", `"` + base64.StdEncoding.EncodeToString([]byte(`{"a":`)) + `"`, ctJSON},
		{"JSON with invalid UTF-8 in a string", "{\"a\":\"\xff\"}", ctJSON, "", `"` + base64.StdEncoding.EncodeToString([]byte("{\"a\":\"\xff\"}")) + `"`, ctJSON},
		{"+json message", `{"x":1}`, "application/vnd.acme+json", `{"x":1}`, "", "application/vnd.acme+json"},
		{"xml message", `<a/>`, "application/xml", "", `"` + base64.StdEncoding.EncodeToString([]byte(`<a/>`)) + `"`, "application/xml"},
		{"no content type", "\x01", "", "", `"AQ=="`, ""},
	}
	w := shapeOf(Config{Envelope: EnvelopeCloudEventsStructured})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := decodeObject(t, w.recordValue(envelopeEvent(c.payload, c.contentType)))
			want := map[string]string{"specversion": `"1.0"`, "id": `"e-1"`, "source": `"/outbox-cdc/public.outbox"`,
				"type": `"order.placed"`, "time": `"2026-03-01T12:30:45.123456789Z"`, "subject": `"o-7"`, "partitionkey": `"o-7"`,
				"data": c.data, "data_base64": c.dataBase64}
			if c.wantType != "" {
				want["datacontenttype"] = `"` + c.wantType + `"`
			}
			for k, v := range want {
				got, ok := m[k]
				switch {
				case v == "" && ok:
					t.Errorf("%s = %s, want it absent", k, got)
				case v != "" && string(got) != v:
					t.Errorf("%s = %s, want %s", k, got, v)
				case v == "":
					delete(want, k)
				}
			}
			if len(m) != len(want) {
				t.Errorf("%d members, want %d: %s", len(m), len(want), m)
			}
		})
	}
}

// TestCloudEventStructuredAttributes: no subject nor partitionkey for a
// null key, the configured source, and escaping in attributes.
func TestCloudEventStructuredAttributes(t *testing.T) {
	w := shapeOf(Config{Envelope: EnvelopeCloudEventsStructured, CloudEventsSource: "urn:example:orders"})
	ev := envelopeEvent(`{}`, ctJSON)
	ev.AggregateID, ev.EventType = "", "quote\"and\\back"
	m := decodeObject(t, w.recordValue(ev))
	if _, ok := m["subject"]; ok {
		t.Errorf("subject %s for a null key", m["subject"])
	}
	if _, ok := m["partitionkey"]; ok {
		t.Errorf("partitionkey %s for a null key", m["partitionkey"])
	}
	var typ, source string
	if err := json.Unmarshal(m["type"], &typ); err != nil || typ != ev.EventType {
		t.Errorf("type %s, want %q (%v)", m["type"], ev.EventType, err)
	}
	if err := json.Unmarshal(m["source"], &source); err != nil || source != "urn:example:orders" {
		t.Errorf("source %s, want the configured one (%v)", m["source"], err)
	}
}

// TestStructuredEnvelopeHeaders: cloudevents-structured adds its
// content-type to the raw headers, and no ce_* header; connect-json adds
// nothing; a tombstone stays a null value with no content-type, under
// both.
func TestStructuredEnvelopeHeaders(t *testing.T) {
	for _, env := range []Envelope{EnvelopeCloudEventsStructured, EnvelopeConnectJSON} {
		w := shapeOf(Config{Envelope: env, MetadataHeaders: true})
		ev := envelopeEvent(`{"a":1}`, ctJSON)
		ev.Headers = []decode.Header{{Key: "traceparent", Value: []byte("00-1")}}
		hs := headerMap(w.headers(ev))
		want := map[string]string{"id": "e-1", "event_type": "order.placed", "aggregate_type": "order", "traceparent": "00-1",
			HeaderCommitLSN: "0/0", HeaderXid: "0", HeaderCommitTime: "2026-03-01T12:30:46.123456789Z"}
		if env == EnvelopeCloudEventsStructured {
			want["content-type"] = ContentTypeCloudEvents
		}
		if len(hs) != len(want) {
			t.Errorf("%s: headers %v, want %v", env, hs, want)
		}
		for k, v := range want {
			if hs[k] != v {
				t.Errorf("%s: header %s = %q, want %q", env, k, hs[k], v)
			}
		}
		tomb := envelopeEvent("", ctJSON)
		tomb.Payload, tomb.Tombstone = nil, true
		if v := w.recordValue(tomb); v != nil {
			t.Errorf("%s: tombstone value %q, want null", env, v)
		}
		if _, ok := headerMap(w.headers(tomb))["content-type"]; ok {
			t.Errorf("%s: a tombstone has a content-type header", env)
		}
		if v, _, _ := w.deadLetterValue(ev); !json.Valid(v) {
			t.Errorf("%s: dead letter value %q, want the record's envelope", env, v)
		}
	}
}

func headerMap(hs []kafka.Header) map[string]string {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

// TestRawEnvelopesUnchanged: raw and binary cloudevents still send the
// payload byte for byte, an empty one as an empty value.
func TestRawEnvelopesUnchanged(t *testing.T) {
	for _, env := range []Envelope{EnvelopeRaw, EnvelopeCloudEvents, ""} {
		w := shapeOf(Config{Envelope: env})
		ev := envelopeEvent(`{"a": 1}`, ctJSON)
		if v := w.recordValue(ev); string(v) != `{"a": 1}` {
			t.Errorf("%q: value %q, want the payload", env, v)
		}
		ev.Payload = nil
		if v := w.recordValue(ev); v == nil || len(v) != 0 {
			t.Errorf("%q: value %#v for no payload, want empty", env, v)
		}
		if v, _, _ := w.deadLetterValue(ev); v != nil {
			t.Errorf("%q: dead letter value %#v for no payload, want nil as before", env, v)
		}
	}
}
