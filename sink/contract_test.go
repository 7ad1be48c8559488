package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// refusedPayload is what a contract says of a payload it refuses, as
// contract.Violation does.
type refusedPayload struct {
	missing    bool
	overBudget bool
	loc        string
}

func (r *refusedPayload) Error() string         { return fmt.Sprintf("refused (missing %v)", r.missing) }
func (r *refusedPayload) MissingContract() bool { return r.missing }
func (r *refusedPayload) BudgetExceeded() bool  { return r.overBudget }
func (r *refusedPayload) Location() string      { return r.loc }

// byPayload is a Contracts that refuses the payloads it lists.
type byPayload map[string]error

func (c byPayload) Validate(_ string, payload []byte) error { return c[string(payload)] }

// violations counts ContractViolated by event type, and
// ContractOverBudget under "budget:" and the type.
type violations struct {
	nopObserver
	mu sync.Mutex
	n  map[string]int
}

func (v *violations) ContractViolated(eventType string) {
	v.mu.Lock()
	v.n[eventType]++
	v.mu.Unlock()
}

func (v *violations) ContractOverBudget(eventType string) {
	v.mu.Lock()
	v.n["budget:"+eventType]++
	v.mu.Unlock()
}

// TestContracts: what the contract refuses is dead-lettered with its
// reason and, for a violation, the location header, and counted by event
// type; a missing contract is not a violation; a payload too costly to
// check is dead-lettered with its own reason and counted apart, and the
// stream goes on; a tombstone is not checked; without a dead-letter topic
// a refusal is a permanent error.
func TestContracts(t *testing.T) {
	const loc = `{"instanceLocation":"/n","keywordLocation":"/properties/n/type"}`
	contracts := byPayload{
		"bad":     &refusedPayload{loc: loc},
		"unknown": &refusedPayload{missing: true},
		"costly":  &refusedPayload{overBudget: true},
		"":        &refusedPayload{loc: "{}"}, // would refuse a tombstone, were it asked
	}
	for _, tc := range []struct {
		name, payload string
		tombstone     bool
		reason        string // of the dead letter; "" published
		header        string // HeaderContractError
		counted       int
		overBudget    int // counted as such
	}{
		{name: "valid", payload: "good"},
		{name: "violation", payload: "bad", reason: ReasonContractViolation, header: loc, counted: 1},
		{name: "no contract", payload: "unknown", reason: ReasonContractMissing},
		{name: "over budget", payload: "costly", reason: ReasonContractBudget, overBudget: 1},
		{name: "tombstone", tombstone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &violations{n: map[string]int{}}
			ctx, cluster, w, o := eventsWriter(t, Config{Contracts: contracts, Observer: obs})
			ev := &decode.Event{ID: "e-1", AggregateID: "k", EventType: "Order", Payload: []byte(tc.payload), Tombstone: tc.tombstone}
			if tc.tombstone {
				ev.Payload = nil
			}
			if err := w.Publish(ctx, ev, 1); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			o.wait(ctx, t, 1)
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if f, _ := o.get(1); f.err != nil || f.reason != tc.reason {
				t.Errorf("fate: reason %q, err %v; want reason %q", f.reason, f.err, tc.reason)
			}
			into := "events"
			if tc.reason != "" {
				into = "dlq"
			}
			msgs := readPartition(ctx, t, cluster.ListenAddrs(), into, 0)
			if len(msgs) != 1 {
				t.Fatalf("%s holds %d records, want 1", into, len(msgs))
			}
			got, _ := headerOf(msgs[0].Headers, HeaderContractError)
			if reason, _ := headerOf(msgs[0].Headers, HeaderReason); reason != tc.reason || got != tc.header {
				t.Errorf("record in %s: reason %q, %s %q; want %q, %q", into, reason, HeaderContractError, got, tc.reason, tc.header)
			}
			if obs.n["Order"] != tc.counted || obs.n["budget:Order"] != tc.overBudget {
				t.Errorf("%d violations and %d over budget counted, want %d and %d", obs.n["Order"], obs.n["budget:Order"], tc.counted, tc.overBudget)
			}
		})
	}
}

// TestContractWithoutDeadLetterTopic: the refusal is returned, permanent,
// and counted once.
func TestContractWithoutDeadLetterTopic(t *testing.T) {
	topic, _ := ParseTopic("events")
	obs := &violations{n: map[string]int{}}
	w := NewWriter(Config{Brokers: []string{"127.0.0.1:1"}, Topic: topic, Contracts: byPayload{"bad": &refusedPayload{loc: "{}"}, "costly": &refusedPayload{overBudget: true}}, Observer: obs},
		func(uint64, string, error) {})
	defer w.Close(context.Background())
	err := w.Publish(context.Background(), &decode.Event{ID: "e", EventType: "Order", Payload: []byte("bad")}, 1)
	var perr *Error
	if !errors.As(err, &perr) || perr.Reason != ReasonContractViolation || perr.Retriable() || obs.n["Order"] != 1 {
		t.Errorf("Publish: %v (counted %d); want a permanent %s, counted once", err, obs.n["Order"], ReasonContractViolation)
	}
	err = w.Publish(context.Background(), &decode.Event{ID: "e2", EventType: "Order", Payload: []byte("costly")}, 2)
	if !errors.As(err, &perr) || perr.Reason != ReasonContractBudget || perr.Retriable() || obs.n["budget:Order"] != 1 {
		t.Errorf("Publish: %v (counted %d); want a permanent %s, counted once", err, obs.n["budget:Order"], ReasonContractBudget)
	}
}
