package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// Registry frames record values in a schema registry's wire format
// (package registry does, from --schema-registry). Declared here with the
// one method Publish calls, so that sink knows nothing of registries.
type Registry interface {
	// Frame returns the record value of payload, an event of eventType
	// routed to topic: framed with its contract's schema id, or payload
	// itself when the type has no contract. Its error may say whether
	// retrying can help (Retriable) and whether the registry refused the
	// contract (Refused, RegistryMessage).
	Frame(ctx context.Context, topic, eventType string, payload []byte) ([]byte, error)
}

// HeaderRegistryError is a schema_registry_refused dead letter's header:
// the registry's own answer, such as "409 Incompatible artifact ...
// (error_code 409)". outbox_cdc.error says the same, with the subject.
const HeaderRegistryError = "outbox_cdc.schema_registry_error"

// registryRefusal is what a Registry error may say of itself
// (registry.Error does).
type registryRefusal interface {
	Refused() bool           // the contract itself: ReasonSchemaRegistryRefused
	RegistryMessage() string // for HeaderRegistryError
}

// registryRetriable is a Registry error that says whether retrying can
// help: the registry did not answer, or answered 5xx.
type registryRetriable interface{ Retriable() bool }

// A registry that cannot be reached is asked again after a capped,
// jittered backoff between these, the produce engine's defaults.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// value is ev's record value, value, framed by the registry when there is one.
// A registry that cannot be reached, or fails, is waited for with backoff
// until it answers or ctx ends, as write waits for a broker: ev is not
// handed over meanwhile, so nothing after it overtakes it, and ctx's end
// leaves it to be handed over again. A contract the registry refuses
// dead-letters ev (ReasonSchemaRegistryRefused); then settled is true and
// err is Publish's answer, as it is for a failure retrying cannot mend.
func (w *Writer) value(ctx context.Context, ev *decode.Event, topic string, token uint64, value []byte) (_ []byte, settled bool, err error) {
	if w.cfg.Registry == nil || ev.Tombstone {
		return value, false, nil
	}
	for attempt := 0; ; attempt++ {
		framed, err := w.cfg.Registry.Frame(ctx, topic, ev.EventType, value)
		if err == nil {
			return framed, false, nil
		}
		if ctx.Err() != nil {
			return nil, true, fmt.Errorf("publish to %s: %w", topic, context.Cause(ctx))
		}
		var refusal registryRefusal
		if errors.As(err, &refusal) && refusal.Refused() {
			perr := &Error{Topic: topic, Reason: ReasonSchemaRegistryRefused, Err: err}
			return nil, true, w.deadLetterEvent(ctx, ev, topic, token, perr,
				producer.Header{Key: HeaderRegistryError, Value: []byte(refusal.RegistryMessage())})
		}
		var r registryRetriable
		if !errors.As(err, &r) || !r.Retriable() {
			return nil, true, &Error{Topic: topic, Err: err} // wrong credentials or URL: stop, without confirming ev
		}
		select {
		case <-time.After(backoff.Delay(attempt, backoffMin, backoffMax)):
		case <-ctx.Done():
			return nil, true, fmt.Errorf("publish to %s: %w", topic, context.Cause(ctx))
		}
	}
}
