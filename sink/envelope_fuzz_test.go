package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestAppendString: what encoding/json writes (HTML escaping off) for valid
// UTF-8, and \ufffd for each byte that is not.
func TestAppendString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{"q\"b\\s/", `"q\"b\\s/"`},
		{"\b\f\n\r\t\x00\x1f\x7f", `"\b\f\n\r\t\u0000\u001f` + "\x7f" + `"`},
		{"<&>", `"<&>"`},
		{"é€😀", `"é€😀"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"a\xffb\xc3", `"a\ufffdb\ufffd"`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // a surrogate half is not UTF-8
	}
	for _, c := range cases {
		if got := string(appendString(nil, c.in)); got != c.want {
			t.Errorf("appendString(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := string(appendString(nil, []byte(c.in))); got != c.want {
			t.Errorf("appendString([]byte(%q)) = %s, want %s", c.in, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		s := randomText(rng)
		if got, want := appendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, encoding/json %s", s, got, want)
		}
	}
}

func encodingJSON(t *testing.T, s string) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// randomText is a short string of ASCII, control characters, multi-byte
// runes and stray bytes.
func randomText(rng *rand.Rand) string {
	pieces := []string{"a", "Z", " ", `"`, `\`, "/", "\n", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "\xff", "\xc3", "\xed\xa0\x80", "{", "}", "[", "]", ":", ",", "1", "-", ".", "e", "null", "true"}
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// randomJSON is a JSON value of up to depth levels, homogeneous arrays or
// not, keys repeated, escaped or empty at times: what expansion must either
// expand or fall back from.
func randomJSON(rng *rand.Rand, depth int) string {
	n := 7
	if depth <= 0 {
		n = 5
	}
	switch rng.IntN(n) {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[rng.IntN(2)]
	case 2:
		return []string{"0", "-1", "42", "9223372036854775807", "-9223372036854775809", "1.5", "-2e-3", "1E400"}[rng.IntN(8)]
	case 3, 4:
		return string(appendString(nil, randomText(rng)))
	case 5:
		var b strings.Builder
		b.WriteByte('{')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString([]string{`"a"`, `"b"`, `"\u0061"`, `""`, `"k é"`}[rng.IntN(5)] + ": " + randomJSON(rng, depth-1))
		}
		b.WriteByte('}')
		return b.String()
	}
	elem := randomJSON(rng, depth-1)
	items := make([]string, rng.IntN(4))
	for i := range items {
		if rng.IntN(3) == 0 {
			items[i] = randomJSON(rng, depth-1)
		} else {
			items[i] = elem // homogeneous, mostly
		}
	}
	return "[" + strings.Join(items, ",") + "]"
}

// envelopeContentTypes are the content types the fuzz picks from.
var envelopeContentTypes = []string{ctJSON, ctText, ctBytes, "application/xml", "", "application/x+json; charset=utf-8"}

// checkEnvelopes publishes one payload under each structured envelope and
// checks that every value is valid UTF-8 JSON, that JsonConverter would
// read the connect-json ones, and that the CloudEvent gives the payload
// back; then the size bound and the row's header (checkBounded,
// checkRowHeader).
func checkEnvelopes(t *testing.T, payload []byte, contentType, id, header string, limit int) {
	t.Helper()
	ev := envelopeEvent(string(payload), contentType)
	ev.ID = id
	if got, want := quotedLen(payload), len(appendString(nil, payload)); got != want {
		t.Fatalf("quotedLen(%q) = %d, appendString wrote %d", payload, got, want)
	}
	if validJSON(payload) {
		compact := appendCompacted(nil, payload)
		var want bytes.Buffer
		if err := json.Compact(&want, payload); err != nil || !bytes.Equal(compact, want.Bytes()) || compactLen(payload) != len(compact) {
			t.Fatalf("appendCompact(%q) = %q (compactLen %d), json.Compact %q (%v)", payload, compact, compactLen(payload), want.Bytes(), err)
		}
	}
	for _, cfg := range []Config{{Envelope: EnvelopeCloudEventsStructured}, {Envelope: EnvelopeConnectJSON}, {Envelope: EnvelopeConnectJSON, ConnectExpandPayload: true}} {
		cfg.MaxMessageBytes = 1 << 30
		v := shapeOf(cfg).recordValue(ev)
		if !json.Valid(v) || !utf8.Valid(v) {
			t.Fatalf("%s (expand %v), payload %q (%s): not valid UTF-8 JSON:\n%s", cfg.Envelope, cfg.ConnectExpandPayload, payload, contentType, v)
		}
		checkBounded(t, cfg, ev, v, limit)
		if cfg.Envelope == EnvelopeConnectJSON {
			if err := connectCheck(v); err != nil {
				t.Fatalf("payload %q (%s), expand %v: %v\n%s", payload, contentType, cfg.ConnectExpandPayload, err, v)
			}
			continue
		}
		if err := cloudEventGivesBack(v, payload); err != nil {
			t.Fatalf("payload %q (%s): %v\n%s", payload, contentType, err, v)
		}
	}
	checkRowHeader(t, ev, header)
}

// checkBounded checks the value of ev built under limit against want,
// built without: the same value, or none when want is larger than the
// limit (for an expanded payload, its string form may stand in); the
// sizes said are the values'; valueFloor is a lower bound.
func checkBounded(t *testing.T, cfg Config, ev *decode.Event, want []byte, limit int) {
	t.Helper()
	if floor := shapeOf(cfg).valueFloor(ev); floor > len(want) {
		t.Fatalf("%s (expand %v), payload %q: floor %d above the value's %d bytes", cfg.Envelope, cfg.ConnectExpandPayload, ev.Payload, floor, len(want))
	}
	cfg.MaxMessageBytes = limit
	v, n, fits := shapeOf(cfg).value(ev)
	expanded := cfg.ConnectExpandPayload
	switch {
	case fits && (len(v) != n || n > limit):
		t.Fatalf("%s (expand %v), limit %d: a value of %d bytes said to be %d", cfg.Envelope, expanded, limit, len(v), n)
	case fits && !bytes.Equal(v, want) && !expanded:
		t.Fatalf("%s, limit %d: %s, without a limit %s", cfg.Envelope, limit, v, want)
	case !fits && (v != nil || n <= limit):
		t.Fatalf("%s (expand %v), limit %d: refused a value of %d bytes said to be %d", cfg.Envelope, expanded, limit, len(v), n)
	case !fits && len(want) <= limit:
		t.Fatalf("%s (expand %v), limit %d: refused a value of %d bytes (%s)", cfg.Envelope, expanded, limit, len(want), want)
	}
}

// checkRowHeader checks that a row's header named name leaves the relay's
// headers one of each name, case aside, and goes as it is or renamed.
func checkRowHeader(t *testing.T, ev *decode.Event, name string) {
	t.Helper()
	for _, env := range []Envelope{EnvelopeRaw, EnvelopeCloudEvents, EnvelopeCloudEventsStructured, EnvelopeConnectJSON} {
		s := shapeOf(Config{Envelope: env, MetadataHeaders: true})
		relay := s.headers(ev)
		row := *ev
		row.Headers = []decode.Header{{Key: name, Value: []byte("row")}}
		hs := s.headers(&row)
		if len(hs) != len(relay)+1 {
			t.Fatalf("%s: %d headers with the row's %q, %d without", env, len(hs), name, len(relay))
		}
		for _, h := range relay {
			if k := hs[len(hs)-1].Key; strings.EqualFold(k, h.Key) {
				t.Fatalf("%s: the row's header %q went as %q, a name the relay writes", env, name, k)
			}
		}
		if k := hs[len(hs)-1].Key; k != name && k != RowHeaderPrefix+name {
			t.Fatalf("%s: the row's header %q went as %q", env, name, k)
		}
	}
}

// cloudEventGivesBack checks that a structured CloudEvent's data holds
// payload: as compacted JSON, as a string of its text, or as base64 of its
// bytes.
func cloudEventGivesBack(v, payload []byte) error {
	var ce struct {
		Data       json.RawMessage `json:"data"`
		DataBase64 *string         `json:"data_base64"`
	}
	if err := json.Unmarshal(v, &ce); err != nil {
		return err
	}
	var text string
	switch compact := new(bytes.Buffer); {
	case ce.DataBase64 != nil:
		if b, err := base64.StdEncoding.DecodeString(*ce.DataBase64); err != nil || !bytes.Equal(b, payload) {
			return fmt.Errorf("data_base64 gives %q (%v)", b, err)
		}
	case json.Unmarshal(ce.Data, &text) == nil && text == string(payload):
	case json.Compact(compact, payload) == nil && bytes.Equal(compact.Bytes(), ce.Data):
	default:
		return fmt.Errorf("data %s is not the payload", ce.Data)
	}
	return nil
}

// TestEnvelopesAlwaysParse is the fuzz's property over a fixed sample of
// random payloads, so that it runs with every go test.
func TestEnvelopesAlwaysParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		payload := randomJSON(rng, 4)
		if i%4 == 0 { // break some
			payload = payload[:rng.IntN(len(payload)+1)] + randomText(rng)
		}
		checkEnvelopes(t, []byte(payload), envelopeContentTypes[rng.IntN(len(envelopeContentTypes))], randomText(rng),
			rowHeaderNames[rng.IntN(len(rowHeaderNames))], 200+rng.IntN(800))
	}
}

// rowHeaderNames are row headers the fuzz's seeds and the sample use:
// the relay's own names, in any case, and others.
var rowHeaderNames = []string{"traceparent", "ce_source", "CE_TYPE", "content-type", "Content-Type", "outbox_cdc.commit_lsn",
	"OUTBOX_CDC.reason", "id", "Event_Type", "aggregate_type", "x-row-ce_source", "ce", "outbox_cdc"}

// FuzzEnvelopes drives the structured envelopes with a payload, its
// content type, an id, a row header's name and a --max-message-bytes (from
// 64 bytes up): go test -run '^$' -fuzz '^FuzzEnvelopes$' -fuzztime 25000x ./sink/
// Its seed corpus is testdata/fuzz/FuzzEnvelopes.
func FuzzEnvelopes(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,null],"b":{"c":"\u00e9"}}`), uint8(0), "id-1", "ce_source", uint16(400))
	f.Add([]byte("caf\xe9 \x00"), uint8(1), "\xff", "OUTBOX_CDC.lsn", uint16(0))
	f.Add([]byte(`[{"a":1},{"a":"x"}]`), uint8(2), "", "traceparent", uint16(300))
	f.Add([]byte(`{"a":1,"\u0061":2}`), uint8(5), "\u2028", "Content-Type", uint16(1000))
	f.Fuzz(func(t *testing.T, payload []byte, ct uint8, id, header string, limit uint16) {
		checkEnvelopes(t, payload, envelopeContentTypes[int(ct)%len(envelopeContentTypes)], id, header, 64+int(limit))
	})
}

// BenchmarkEnvelope is each envelope's cost per event: the value and the
// headers Publish builds, for a 300-byte jsonb payload.
func BenchmarkEnvelope(b *testing.B) {
	payload := `{"order_id": "3f1c9a", "customer": {"id": 4711, "tier": "gold"}, "lines": [{"sku": "A-1", "qty": 2, "price": 12.5}, ` +
		`{"sku": "B-22", "qty": 1, "price": 99.99}], "total": 124.99, "currency": "EUR", "placed_at": "2026-03-01T12:30:45Z", "gift": false}`
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"raw", Config{Envelope: EnvelopeRaw}},
		{"cloudevents", Config{Envelope: EnvelopeCloudEvents}},
		{"cloudevents-structured", Config{Envelope: EnvelopeCloudEventsStructured}},
		{"connect-json", Config{Envelope: EnvelopeConnectJSON}},
		{"connect-json-expanded", Config{Envelope: EnvelopeConnectJSON, ConnectExpandPayload: true}},
	} {
		w := shapeOf(c.cfg)
		ev := envelopeEvent(payload, ctJSON)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			n := 0
			for b.Loop() {
				n += len(w.recordValue(ev)) + len(w.headers(ev))
			}
			b.ReportMetric(float64(len(w.recordValue(ev))), "value-bytes")
		})
	}
}
