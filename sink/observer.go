package sink

import (
	"time"

	"github.com/segmentio/kafka-go"
)

// Observer is told what becomes of events, for metrics. Its methods are
// called from the writer's goroutines and must not block.
type Observer interface {
	// Acked reports one produce request acknowledged by the broker: the
	// events' topic and the commit time of each event in it.
	Acked(topic string, commits []time.Time)
	// Request reports one produce request answered (or failed): how many
	// partitions and records it carried.
	Request(partitions, records int)
	// Sent reports n bytes written to a broker connection.
	Sent(n int)
	// DeadLettered reports one event dead-lettered, with its reason.
	DeadLettered(reason string)
	// ProduceFailed reports one failed produce attempt; kind is a short,
	// bounded name for the failure (a Kafka error code, or "network").
	ProduceFailed(kind string)
	// PartitionsChanged reports that topic's partition count changed.
	PartitionsChanged(topic string)
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

// acked tells the observer about acknowledged events; dead letters are
// counted when they are made.
func (w *Writer) acked(msgs []kafka.Message) {
	commits := make([]time.Time, 0, len(msgs))
	for i := range msgs {
		if m, ok := msgs[i].WriterData.(meta); ok && m.reason == "" {
			commits = append(commits, m.commit)
		}
	}
	if len(commits) > 0 {
		w.cfg.Observer.Acked(msgs[0].Topic, commits)
	}
}
