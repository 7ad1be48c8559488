package sink

import (
	"context"
	"errors"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// Contracts checks each event's payload against its event type's contract
// before it is published (package contract's Set does, from --contracts).
// Declared here with the one method Publish calls, so that sink knows
// nothing of JSON Schema.
type Contracts interface {
	// Validate returns nil when payload may be published as eventType,
	// otherwise why not. The error may answer, through the methods of
	// refusal, whether the type has no contract at all and where the
	// payload fails.
	Validate(eventType string, payload []byte) error
}

// HeaderContractError is a contract violation's dead-letter header: where
// the payload fails, as JSON Schema's output formats name it, in a small
// JSON object: {"instanceLocation":"/amount","keywordLocation":
// "/properties/amount/type"}, with "absoluteKeywordLocation" (file#pointer)
// when a $ref led into another file. Both locations are empty when the
// payload is not JSON. outbox_cdc.error says what failed, for people.
const HeaderContractError = "outbox_cdc.contract_error"

// refusal is what a Contracts error may say of itself (contract.Violation
// does).
type refusal interface {
	MissingContract() bool // no contract for the event type: ReasonContractMissing
	Location() string      // for HeaderContractError; empty: none
}

// overBudget is what a Contracts error may say when checking the payload
// would cost more than its budget: ReasonContractBudget. A separate
// interface, so that a Contracts without a budget need not answer.
type overBudget interface {
	BudgetExceeded() bool
}

// enforceContract dead-letters ev when its contract refuses it (or, without
// a dead-letter topic, returns the permanent *Error) and reports refused;
// a tombstone has no payload to check. A violation, and a payload too
// costly to check, is counted by event type once its dead letter is
// handed over, or once it stops the stream.
func (w *Writer) enforceContract(ctx context.Context, ev *decode.Event, topic string, token uint64) (refused bool, err error) {
	if w.cfg.Contracts == nil || ev.Tombstone {
		return false, nil
	}
	verr := w.cfg.Contracts.Validate(ev.EventType, ev.Payload)
	if verr == nil {
		return false, nil
	}
	perr := &Error{Topic: topic, Reason: ReasonContractViolation, Err: verr}
	var extra []producer.Header
	var r refusal
	var ob overBudget
	errors.As(verr, &r)
	switch {
	case errors.As(verr, &ob) && ob.BudgetExceeded():
		perr.Reason = ReasonContractBudget
	case r != nil && r.MissingContract():
		perr.Reason = ReasonContractMissing
	case r != nil && r.Location() != "":
		extra = []producer.Header{{Key: HeaderContractError, Value: []byte(r.Location())}}
	}
	err = w.deadLetterEvent(ctx, ev, topic, token, perr, extra...)
	if err == nil || w.cfg.DeadLetterTopic == "" {
		switch perr.Reason {
		case ReasonContractViolation:
			w.cfg.Observer.ContractViolated(ev.EventType)
		case ReasonContractBudget:
			w.cfg.Observer.ContractOverBudget(ev.EventType)
		}
	}
	return true, err
}
