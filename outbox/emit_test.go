package outbox

import (
	"encoding/json"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/message"
)

func TestEncodeForEmit(t *testing.T) {
	for name, c := range map[string]struct {
		payload     any
		contentType string
		wantValue   string
		wantType    string
	}{
		"raw JSON kept as written": {json.RawMessage(`{"a":  1}`), "", `{"a":  1}`, message.DefaultContentType},
		"a value, marshalled":      {map[string]int{"a": 1}, "", `{"a":1}`, message.DefaultContentType},
		"text":                     {"hello", "", "hello", "text/plain; charset=utf-8"},
		"bytes":                    {[]byte{0, 1, 2}, "", "\x00\x01\x02", "application/octet-stream"},
		"bytes, typed":             {[]byte(`<a/>`), "application/xml", "<a/>", "application/xml"},
	} {
		ev := Event{AggregateType: "order", AggregateID: "o-1", EventType: "E", Payload: c.payload, ContentType: c.contentType,
			Headers: map[string]string{"b": "2", "a": "1"}}
		b, err := encode(&ev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := message.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch {
		case got.ID == "" || got.ID != ev.ID:
			t.Errorf("%s: id %q, event given %q", name, got.ID, ev.ID)
		case string(got.Payload) != c.wantValue || got.ContentType != c.wantType:
			t.Errorf("%s: payload %q (%s), want %q (%s)", name, got.Payload, got.ContentType, c.wantValue, c.wantType)
		case len(got.Headers) != 2 || got.Headers[0].Key != "a" || string(got.Headers[1].Value) != "2":
			t.Errorf("%s: headers %+v, want a=1, b=2 in order", name, got.Headers)
		}
	}
	for name, ev := range map[string]Event{
		"columns":         {AggregateID: "o-1", Payload: "x", Columns: map[string]any{"tenant": "t"}},
		"no aggregate id": {Payload: "x"},
		"nil payload":     {AggregateID: "o-1"},
	} {
		if _, err := encode(&ev); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}
