package sink

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestRowHeadersCannotForgeRelayHeaders: a row's header named as one the
// relay writes (outbox_cdc.* always; ce_* and content-type under either
// CloudEvents envelope; id, event_type, aggregate_type), in any case, goes
// as x-row-<name>, so that a consumer reading the last header of a name
// (Java's lastHeader, the CloudEvents SDKs) reads the relay's; every other
// row header goes as it is, and each renamed one is counted.
func TestRowHeadersCannotForgeRelayHeaders(t *testing.T) {
	forged := []decode.Header{
		{Key: "ce_source", Value: []byte("/payments-service")},
		{Key: "ce_type", Value: []byte("RefundApproved")},
		{Key: "Ce_Id", Value: []byte("forged")},
		{Key: "content-type", Value: []byte("application/cloudevents+json")},
		{Key: "outbox_cdc.commit_lsn", Value: []byte("FFFFFFFF/0")},
		{Key: "OUTBOX_CDC.reason", Value: []byte("forged")},
		{Key: "ID", Value: []byte("forged")},
		{Key: "Event_Type", Value: []byte("forged")},
		{Key: "traceparent", Value: []byte("00-1")},
	}
	cloudEvents := []string{"ce_source", "ce_type", "Ce_Id", "content-type"}
	for _, tt := range []struct {
		env      Envelope
		reserved []string // the row headers renamed, besides outbox_cdc.*, id and event_type
	}{
		{EnvelopeRaw, nil},
		{EnvelopeConnectJSON, nil},
		{EnvelopeCloudEvents, cloudEvents},
		{EnvelopeCloudEventsStructured, cloudEvents},
	} {
		t.Run(string(tt.env), func(t *testing.T) {
			s := shapeOf(Config{Envelope: tt.env, MetadataHeaders: true, CloudEventsSource: "/orders-service"})
			ev := envelopeEvent(`{"a":1}`, ctJSON)
			ev.Headers = forged
			hs, renamed := s.headers(ev), s.renamedRowHeaders(ev)
			reserved := append([]string{"outbox_cdc.commit_lsn", "OUTBOX_CDC.reason", "ID", "Event_Type"}, tt.reserved...)
			for _, h := range forged {
				want := h.Key
				for _, r := range reserved {
					if r == h.Key {
						want = RowHeaderPrefix + h.Key
					}
				}
				got, ok := headerOf(hs, want)
				if !ok || got != string(h.Value) {
					t.Errorf("row header %s: %s = %q (%v), want %q", h.Key, want, got, ok, h.Value)
				}
			}
			if renamed != len(reserved) {
				t.Errorf("%d row headers renamed, want %d", renamed, len(reserved))
			}
			// The relay's own headers appear once, case aside, with its values.
			seen := map[string]int{}
			for _, h := range hs {
				seen[strings.ToLower(h.Key)]++
			}
			for _, h := range s.headers(envelopeEvent(`{"a":1}`, ctJSON)) {
				if n := seen[strings.ToLower(h.Key)]; n != 1 {
					t.Errorf("relay header %s appears %d times", h.Key, n)
				}
				if got, _ := headerOf(hs, h.Key); got != string(h.Value) {
					t.Errorf("relay header %s = %q, want %q", h.Key, got, h.Value)
				}
			}
		})
	}
}

// renamedHeaders counts RowHeadersRenamed.
type renamedHeaders struct {
	nopObserver
	n atomic.Int64
}

func (r *renamedHeaders) RowHeadersRenamed(n int) { r.n.Add(int64(n)) }

// TestRenamedRowHeadersCounted: each row header renamed is reported to
// the observer once, when its event is published.
func TestRenamedRowHeadersCounted(t *testing.T) {
	obs := &renamedHeaders{}
	ctx, _, w, o := eventsWriter(t, Config{Envelope: EnvelopeCloudEvents, Observer: obs})
	ev := envelopeEvent(`{"a":1}`, ctJSON)
	ev.Headers = []decode.Header{{Key: "ce_source", Value: []byte("x")}, {Key: "outbox_cdc.xid", Value: []byte("1")}, {Key: "traceparent", Value: []byte("00-1")}}
	if err := w.Publish(ctx, ev, 0); err != nil {
		t.Fatal(err)
	}
	o.wait(ctx, t, 1)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := obs.n.Load(); got != 2 {
		t.Errorf("%d row headers renamed reported, want 2", got)
	}
}
