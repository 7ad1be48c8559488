package sink

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/registry"
)

// contractDocs has a contract for Order alone.
type contractDocs struct{}

func (contractDocs) Document(t string) ([]byte, bool) {
	return []byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema"}`), t == "Order"
}

// TestSchemaRegistry: through a registry (an httptest server behind
// package registry), an Order event's value is framed with its schema id
// and an Other event's is not; a tombstone stays null; a registry that
// answers 5xx holds the event back, then publishes it, before the event
// after it; a refusal dead-letters the event, unframed, with the
// registry's answer; wrong credentials stop the stream.
func TestSchemaRegistry(t *testing.T) {
	const refusal = `{"message":"Incompatible artifact","error_code":409}`
	framed := append([]byte{0, 0, 0, 0x01, 0x02}, `{"n":1}`...)
	for _, tc := range []struct {
		name     string
		failures int    // 503s before the answer
		status   int    // the answer
		reason   string // of the first event's fate; "" published
		stops    bool   // Publish fails for good
	}{
		{name: "registered", status: 200},
		{name: "5xx retried", failures: 3, status: 200},
		{name: "409 dead-lettered", status: 409, reason: ReasonSchemaRegistryRefused},
		{name: "401 stops", status: 401, stops: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				switch n := asked.Add(1); {
				case int(n) <= tc.failures:
					w.WriteHeader(503)
				case tc.status == 200:
					_, _ = w.Write([]byte(`{"id":258}`))
				default:
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(refusal))
				}
			}))
			defer srv.Close()
			reg, err := registry.New(registry.Config{URL: srv.URL, Documents: contractDocs{}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			ctx, cluster, w, o := eventsWriter(t, Config{Registry: reg})
			events := []*decode.Event{
				{ID: "e-1", AggregateID: "k", EventType: "Order", Payload: []byte(`{"n":1}`)},
				{ID: "e-2", AggregateID: "k", EventType: "Other", Payload: []byte(`{"n":2}`)},
				{ID: "e-3", AggregateID: "k", EventType: "Order", Tombstone: true},
			}
			for i, ev := range events {
				err := w.Publish(ctx, ev, uint64(i+1))
				var perr *Error
				if tc.stops {
					if !errors.As(err, &perr) || perr.Retriable() || perr.Reason != "" {
						t.Fatalf("Publish: %v; want a permanent error without a reason", err)
					}
					if n := asked.Load(); n != 1 {
						t.Errorf("asked the registry %d times, want 1", n)
					}
					return
				}
				if err != nil {
					t.Fatalf("Publish %s: %v", ev.ID, err)
				}
			}
			o.wait(ctx, t, len(events))
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if f, _ := o.get(1); f.err != nil || f.reason != tc.reason {
				t.Errorf("first event's fate: reason %q, err %v; want reason %q", f.reason, f.err, tc.reason)
			}
			var want [][]byte // the values in events, in order
			if tc.reason == "" {
				want = append(want, framed)
			} else {
				dl := readPartition(ctx, t, cluster.ListenAddrs(), "dlq", 0)
				got, _ := headerOf(dl[0].Headers, HeaderRegistryError)
				if len(dl) != 1 || !bytes.Equal(dl[0].Value, []byte(`{"n":1}`)) || got != "409 Incompatible artifact (error_code 409)" {
					t.Errorf("dead letter %q, %s %q", dl[0].Value, HeaderRegistryError, got)
				}
			}
			want = append(want, []byte(`{"n":2}`), nil)
			msgs := readPartition(ctx, t, cluster.ListenAddrs(), "events", 0)
			if len(msgs) != len(want) {
				t.Fatalf("events holds %d records, want %d", len(msgs), len(want))
			}
			for i, m := range msgs {
				if !bytes.Equal(m.Value, want[i]) || (want[i] == nil) != (m.Value == nil) {
					t.Errorf("record %d: value % x, want % x", i, m.Value, want[i])
				}
			}
			if n := int(asked.Load()); n != tc.failures+1 {
				t.Errorf("asked the registry %d times, want %d", n, tc.failures+1)
			}
		})
	}
}
