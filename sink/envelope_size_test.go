package sink

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// oversized is the payload size of the tests of payloads far larger than
// --max-message-bytes (sizeLimit).
const (
	oversized = 50 << 20
	sizeLimit = 1 << 20
	// allocBound is what one event may cost to envelope, dead letter
	// included, in multiples of --max-message-bytes (see shape.value).
	allocBound = 4
)

// hugePayloads are JSON payloads of n bytes: a flat array as jsonb
// prints it (a node per value for an expander), and an array nested as
// deep as it goes.
func hugePayloads(n int) map[string][]byte {
	flat := make([]byte, 0, n)
	flat = append(flat, '[')
	for len(flat) < n-3 {
		flat = append(flat, "0, "...)
	}
	flat = append(flat, '0', ']')
	return map[string][]byte{
		"flat":   flat,
		"nested": []byte(strings.Repeat("[", n/2) + strings.Repeat("]", n/2)),
	}
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestOversizedPayloadDeadLetteredCheaply: a payload that cannot fit
// --max-message-bytes once enveloped is refused before it is enveloped:
// under every envelope, connect-json expanding JSON included, publishing
// it and making its dead letter allocate a few times --max-message-bytes
// at most, whatever its size, and it is dead-lettered once, as too large,
// without its value.
func TestOversizedPayloadDeadLetteredCheaply(t *testing.T) {
	envelopes := []struct {
		name string
		cfg  Config
	}{
		{"raw", Config{Envelope: EnvelopeRaw}},
		{"cloudevents", Config{Envelope: EnvelopeCloudEvents}},
		{"cloudevents-structured", Config{Envelope: EnvelopeCloudEventsStructured}},
		{"connect-json", Config{Envelope: EnvelopeConnectJSON}},
		{"connect-json-expanded", Config{Envelope: EnvelopeConnectJSON, ConnectExpandPayload: true}},
	}
	for shape, payload := range hugePayloads(oversized) {
		for _, env := range envelopes {
			t.Run(shape+"/"+env.name, func(t *testing.T) {
				cfg := env.cfg
				cfg.MaxMessageBytes = sizeLimit
				ctx, cluster, w, o := eventsWriter(t, cfg)
				ev := &decode.Event{ID: "e-1", AggregateID: "o-7", EventType: "order.placed", Payload: payload,
					ContentType: ctJSON, Table: "public.outbox", Time: envelopeTime}
				var err error
				if n := allocated(func() { err = w.Publish(ctx, ev, 0) }); n > allocBound*sizeLimit {
					t.Errorf("publishing a %d-byte payload allocated %d bytes (%.1fx --max-message-bytes), want at most %dx",
						len(payload), n, float64(n)/sizeLimit, allocBound)
				}
				if err != nil {
					t.Fatal(err)
				}
				var keeps bool
				if n := allocated(func() { keeps = w.DeadLetterKeepsValue(ev) }); n > allocBound*sizeLimit {
					t.Errorf("DeadLetterKeepsValue allocated %d bytes (%.1fx --max-message-bytes)", n, float64(n)/sizeLimit)
				}
				if keeps {
					t.Error("DeadLetterKeepsValue: true for a payload its dead letter cannot carry")
				}
				o.wait(ctx, t, 1)
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if f, _ := o.get(0); f.err != nil || f.reason != ReasonMessageTooLarge || f.times != 1 {
					t.Errorf("fate: reason %q, err %v, %d times; want dead-lettered once as %s", f.reason, f.err, f.times, ReasonMessageTooLarge)
				}
				dead := readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0)
				if len(dead) != 1 {
					t.Fatalf("%d dead letters, want 1", len(dead))
				}
				if r, _ := headerOf(dead[0].Headers, HeaderReason); r != ReasonMessageTooLarge {
					t.Errorf("dead letter reason %q, want %s", r, ReasonMessageTooLarge)
				}
				if tr, _ := headerOf(dead[0].Headers, HeaderTruncated); len(dead[0].Value) != 0 || tr != "value" {
					t.Errorf("dead letter: a %d-byte value, %s %q; want the value left out, and said so", len(dead[0].Value), HeaderTruncated, tr)
				}
				if events := readPartition(ctx, t, cluster.ListenAddrs(), "events", 0); len(events) != 0 {
					t.Errorf("%d records in events, want none", len(events))
				}
			})
		}
	}
}

// TestValueAllocationBounded: payloads near --max-message-bytes, the
// shapes that cost an envelope most (a node per value, wide objects, white
// space the compacted form drops, text that escaping inflates, deep
// nesting), cost at most allocBound+2 times the limit to envelope, fitting
// or not, and a value is never larger than the limit.
func TestValueAllocationBounded(t *testing.T) {
	const n = sizeLimit - 1<<10
	var wide bytes.Buffer
	wide.WriteByte('{')
	for i := 0; wide.Len() < n-20; i++ {
		fmt.Fprintf(&wide, `"k%d":0,`, i)
	}
	wide.WriteString(`"end":0}`)
	payloads := hugePayloads(n)
	payloads["wide"] = wide.Bytes()
	payloads["spaced"] = append(append([]byte("{"), bytes.Repeat([]byte(" "), 8*n)...), '1')       // not JSON: a string or base64
	payloads["spaced-json"] = append(append([]byte("[1"), bytes.Repeat([]byte(" "), 8*n)...), ']') // compacts to [1]
	payloads["controls"] = bytes.Repeat([]byte{1}, n)
	payloads["deep-objects"] = []byte(strings.Repeat(`{"a":`, 60) + "1" + strings.Repeat("}", 60))
	for _, cfg := range []Config{{Envelope: EnvelopeCloudEventsStructured}, {Envelope: EnvelopeConnectJSON},
		{Envelope: EnvelopeConnectJSON, ConnectExpandPayload: true}} {
		cfg.MaxMessageBytes = sizeLimit
		s := shapeOf(cfg)
		for name, payload := range payloads {
			for _, ct := range []string{ctJSON, ctText} {
				ev := &decode.Event{ID: "e-1", AggregateID: "o-7", EventType: "order.placed", Payload: payload, ContentType: ct, Time: envelopeTime}
				var v []byte
				var size int
				var fits bool
				got := allocated(func() { v, size, fits = s.value(ev) })
				t.Logf("%s (expand %v) %s %s: %.2fx --max-message-bytes allocated, fits %v", cfg.Envelope, cfg.ConnectExpandPayload, name, ct,
					float64(got)/sizeLimit, fits)
				if got > (allocBound+2)*sizeLimit {
					t.Errorf("%s (expand %v), %s payload of %d bytes (%s): %d bytes allocated, %.1fx --max-message-bytes",
						cfg.Envelope, cfg.ConnectExpandPayload, name, len(payload), ct, got, float64(got)/sizeLimit)
				}
				if fits && (len(v) != size || size > sizeLimit) || !fits && (v != nil || size <= sizeLimit) {
					t.Errorf("%s (expand %v), %s (%s): a value of %d bytes, size %d, fits %v", cfg.Envelope, cfg.ConnectExpandPayload, name, ct, len(v), size, fits)
				}
			}
		}
	}
}

// TestLongArrayExpanded: an array of many values near --max-message-bytes
// is expanded as a shorter one is, its elements sharing one schema that
// the expander holds once (not a node per element).
func TestLongArrayExpanded(t *testing.T) {
	s := shapeOf(Config{Envelope: EnvelopeConnectJSON, ConnectExpandPayload: true, MaxMessageBytes: sizeLimit})
	ev := envelopeEvent(string(hugePayloads(sizeLimit * 3 / 4)["flat"]), ctJSON)
	var v []byte
	if n := allocated(func() { v = s.recordValue(ev) }); n > 3*sizeLimit {
		t.Errorf("%d bytes allocated, %.1fx --max-message-bytes", n, float64(n)/sizeLimit)
	}
	schema, _, _ := connectParts(t, v)
	if want := `{"type":"array","items":{"type":"int64","optional":true},"optional":true,"field":"payload"}`; schema != want {
		t.Errorf("payload schema %s, want %s", schema, want)
	}
}
