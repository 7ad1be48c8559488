package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// connectParts splits a connect-json value into the payload field's schema
// and value, as emitted, after checking it as JsonConverter would.
func connectParts(t *testing.T, value []byte) (schema, payload string, all map[string]json.RawMessage) {
	t.Helper()
	if err := connectCheck(value); err != nil {
		t.Fatalf("JsonConverter would refuse it: %v\n%s", err, value)
	}
	var env struct {
		Schema struct {
			Fields []json.RawMessage `json:"fields"`
		} `json:"schema"`
		Payload map[string]json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(value, &env); err != nil {
		t.Fatal(err)
	}
	for _, f := range env.Schema.Fields {
		if bytes.HasSuffix(f, []byte(`"field":"payload"}`)) {
			schema = string(f)
		}
	}
	return schema, string(env.Payload["payload"]), env.Payload
}

// TestConnectJSON: the payload as a string (text, JSON, bytes holding JSON)
// or as bytes, and the other fields.
func TestConnectJSON(t *testing.T) {
	b64 := func(s string) string { return `"` + base64.StdEncoding.EncodeToString([]byte(s)) + `"` }
	cases := []struct {
		name, payload, contentType string
		wantType, wantValue        string
	}{
		{"jsonb", `{"total": 12.5}`, ctJSON, "string", `"{\"total\": 12.5}"`},
		{"text", "line\nbreak", ctText, "string", `"line\nbreak"`},
		{"empty text", "", ctText, "string", `""`},
		{"bytea holding JSON", `[1,2]`, ctBytes, "string", `"[1,2]"`},
		{"bytea", "\x00\x01", ctBytes, "bytes", b64("\x00\x01")},
		{"bytea that is UTF-8 but not JSON", "plain", ctBytes, "bytes", b64("plain")},
		{"text not UTF-8", "caf\xe9", ctText, "bytes", b64("caf\xe9")},
	}
	w := shapeOf(Config{Envelope: EnvelopeConnectJSON})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema, payload, all := connectParts(t, w.recordValue(envelopeEvent(c.payload, c.contentType)))
			if want := `{"type":"` + c.wantType + `","optional":true,"field":"payload"}`; schema != want {
				t.Errorf("payload schema %s, want %s", schema, want)
			}
			if payload != c.wantValue {
				t.Errorf("payload %s, want %s", payload, c.wantValue)
			}
			want := map[string]string{"id": `"e-1"`, "aggregate_type": `"order"`, "aggregate_id": `"o-7"`,
				"event_type": `"order.placed"`, "timestamp": fmt.Sprint(envelopeTime.UnixMilli())}
			for k, v := range want {
				if string(all[k]) != v {
					t.Errorf("%s = %s, want %s", k, all[k], v)
				}
			}
		})
	}
}

// TestConnectJSONFields: empty aggregate columns are nulls; the timestamp
// follows Config.Timestamp.
func TestConnectJSONFields(t *testing.T) {
	w := shapeOf(Config{Envelope: EnvelopeConnectJSON, Timestamp: TimestampCommit})
	ev := envelopeEvent(`{}`, ctJSON)
	ev.AggregateType, ev.AggregateID = "", ""
	_, _, all := connectParts(t, w.recordValue(ev))
	if string(all["aggregate_type"]) != "null" || string(all["aggregate_id"]) != "null" {
		t.Errorf("aggregate_type %s, aggregate_id %s, want nulls", all["aggregate_type"], all["aggregate_id"])
	}
	if want := fmt.Sprint(ev.CommitTime.UnixMilli()); string(all["timestamp"]) != want {
		t.Errorf("timestamp %s, want the commit time %s", all["timestamp"], want)
	}
}

// TestConnectExpandPayload: inferred schemas, and the fallback to a string
// where a payload cannot be expanded (the cases named "…: string").
func TestConnectExpandPayload(t *testing.T) {
	const opt = `,"optional":true`
	field := func(name, typ string) string { return `{"type":"` + typ + `"` + opt + `,"field":"` + name + `"}` }
	asString := `{"type":"string","optional":true,"field":"payload"}`
	deep := strings.Repeat(`{"a":`, maxExpandDepth+1) + "1" + strings.Repeat("}", maxExpandDepth+1)
	cases := []struct {
		name, payload, contentType, wantSchema string
	}{
		{"flat object", `{"s": "x", "i": -3, "f": 1.5, "e": 1e3, "b": false, "n": null}`, ctJSON,
			`{"type":"struct","fields":[` + field("s", "string") + "," + field("i", "int64") + "," + field("f", "double") + "," +
				field("e", "double") + "," + field("b", "boolean") + "," + field("n", "string") + `]` + opt + `,"field":"payload"}`},
		{"int64 bounds", `{"max":9223372036854775807,"min":-9223372036854775808,"big":9223372036854775808}`, ctJSON,
			`{"type":"struct","fields":[` + field("max", "int64") + "," + field("min", "int64") + "," + field("big", "double") + `]` + opt + `,"field":"payload"}`},
		{"nested", `{"o":{"a":[{"x":1,"y":null},{"x":2.5,"y":"s"},null]}}`, ctJSON,
			`{"type":"struct","fields":[{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[` +
				field("x", "double") + "," + field("y", "string") + `]` + opt + `}` + opt + `,"field":"a"}]` + opt + `,"field":"o"}]` + opt + `,"field":"payload"}`},
		{"empty object", `{}`, ctJSON, `{"type":"struct","fields":[]` + opt + `,"field":"payload"}`},
		{"top-level array", `[[],[1]]`, ctJSON, `{"type":"array","items":{"type":"array","items":{"type":"int64"` + opt + `}` + opt + `}` + opt + `,"field":"payload"}`},
		{"scalar", `"s"`, ctJSON, field("payload", "string")}, // the JSON string's value, not its text
		{"text holding JSON", `{"a":true}`, ctText, `{"type":"struct","fields":[` + field("a", "boolean") + `]` + opt + `,"field":"payload"}`},
		{"escaped key", `{"\u00e9":1}`, ctJSON, `{"type":"struct","fields":[{"type":"int64"` + opt + `,"field":"\u00e9"}]` + opt + `,"field":"payload"}`},
		{"empty array: string", `{"a":[]}`, ctJSON, asString},
		{"heterogeneous array: string", `{"a":[1,"x"]}`, ctJSON, asString},
		{"objects with other keys: string", `[{"a":1},{"b":1}]`, ctJSON, asString},
		{"objects with keys in another order: string", `[{"a":1,"b":2},{"b":1,"a":2}]`, ctJSON, asString},
		{"duplicate key: string", `{"a":1,"a":2}`, ctJSON, asString},
		{"duplicate escaped key: string", `{"a":1,"\u0061":2}`, ctJSON, asString},
		{"empty key: string", `{"":1}`, ctJSON, asString},
		{"top-level null: string", `null`, ctJSON, asString},
		{"too deep: string", deep, ctJSON, asString},
		{"not JSON: string", `{"a":`, ctText, asString},
		{"text scalar: string", `42`, ctText, asString},
	}
	w := shapeOf(Config{Envelope: EnvelopeConnectJSON, ConnectExpandPayload: true})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema, payload, _ := connectParts(t, w.recordValue(envelopeEvent(c.payload, c.contentType)))
			if schema != c.wantSchema {
				t.Errorf("payload schema\n%s\nwant\n%s", schema, c.wantSchema)
			}
			want := &bytes.Buffer{}
			if strings.HasSuffix(c.name, ": string") { // not expanded
				want.Write(appendString(nil, c.payload))
			} else if err := json.Compact(want, []byte(c.payload)); err != nil {
				t.Fatal(err)
			}
			if payload != want.String() {
				t.Errorf("payload %s, want %s", payload, want)
			}
		})
	}
}

// connectCheck reads value as Kafka Connect's JsonConverter does with
// schemas.enable=true (toConnectData), returning what it would throw: an
// envelope of exactly schema and payload, field names non-empty and
// distinct, and every value of its schema's type (null only where
// optional). The Java checker of the integration test runs the real one.
func connectCheck(value []byte) error {
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	var env map[string]any
	if err := d.Decode(&env); err != nil {
		return err
	}
	schema, ok := env["schema"].(map[string]any)
	if _, has := env["payload"]; !ok || !has || len(env) != 2 {
		return errors.New(`want exactly "schema" and "payload"`)
	}
	return checkConnectValue(schema, env["payload"], "payload")
}

func checkConnectValue(schema map[string]any, v any, path string) error {
	if v == nil {
		if schema["optional"] == true {
			return nil
		}
		return fmt.Errorf("%s: null for a required field", path)
	}
	ok := false
	switch schema["type"] {
	case "struct":
		return checkConnectStruct(schema, v, path)
	case "array":
		items, _ := schema["items"].(map[string]any)
		arr, isArr := v.([]any)
		if items == nil || !isArr {
			return fmt.Errorf("%s: %T for an array (items %v)", path, v, schema["items"])
		}
		for i, e := range arr {
			if err := checkConnectValue(items, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case "string":
		_, ok = v.(string)
	case "bytes":
		s, isStr := v.(string)
		_, err := base64.StdEncoding.DecodeString(s)
		ok = isStr && err == nil
	case "int64":
		n, isNum := v.(json.Number)
		_, err := n.Int64()
		ok = isNum && err == nil
	case "double":
		_, ok = v.(json.Number)
	case "boolean":
		_, ok = v.(bool)
	}
	if !ok {
		return fmt.Errorf("%s: %T %v for a %v", path, v, v, schema["type"])
	}
	return nil
}

func checkConnectStruct(schema map[string]any, v any, path string) error {
	obj, isObj := v.(map[string]any)
	fields, hasFields := schema["fields"].([]any)
	if !isObj || !hasFields {
		return fmt.Errorf("%s: %T for a struct (fields %v)", path, v, schema["fields"])
	}
	seen := map[string]bool{}
	for _, f := range fields {
		fs, _ := f.(map[string]any)
		name, _ := fs["field"].(string)
		if name == "" || seen[name] {
			return fmt.Errorf("%s: field name %q empty or repeated", path, name)
		}
		seen[name] = true
		if err := checkConnectValue(fs, obj[name], path+"."+name); err != nil {
			return err
		}
	}
	return nil
}
