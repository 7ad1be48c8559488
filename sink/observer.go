package sink

import (
	"time"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// Observer is told what becomes of events, for metrics: what the produce
// engine's requests do (producer.Observer: Acked, Request, Sent,
// ProduceFailed, PartitionsChanged), and the fates sink decides. Its
// methods are called from the writer's goroutines and must not block.
type Observer interface {
	producer.Observer
	// DeadLettered reports one event dead-lettered, with its reason.
	DeadLettered(reason string)
	// ContractViolated reports one payload its event type's contract
	// refused (Config.Contracts); the event is dead-lettered too.
	ContractViolated(eventType string)
	// ContractOverBudget reports one payload not checked against its
	// event type's contract, the check's cost over its budget; the event
	// is dead-lettered too (ReasonContractBudget).
	ContractOverBudget(eventType string)
	// RowHeadersRenamed reports n headers of one event's row renamed with
	// RowHeaderPrefix, being named as headers the relay writes.
	RowHeadersRenamed(n int)
}

type nopObserver struct{}

func (nopObserver) Acked(string, []time.Time) {}
func (nopObserver) DeadLettered(string)       {}
func (nopObserver) Request(int, int)          {}
func (nopObserver) Sent(int)                  {}
func (nopObserver) ProduceFailed(string)      {}
func (nopObserver) PartitionsChanged(string)  {}
func (nopObserver) ContractViolated(string)   {}
func (nopObserver) ContractOverBudget(string) {}
func (nopObserver) RowHeadersRenamed(int)     {}
