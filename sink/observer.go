package sink

import "time"

// Observer is told what becomes of events, for metrics. Its methods are
// called from the writer's goroutines and must not block.
type Observer interface {
	// Acked reports one produce request acknowledged by the broker: the
	// events' topic and the commit time of each event in it.
	Acked(topic string, commits []time.Time)
	// DeadLettered reports one event dead-lettered, with its reason.
	DeadLettered(reason string)
	// ProduceFailed reports one failed produce attempt; kind is a short,
	// bounded name for the failure (a Kafka error code, or "network").
	ProduceFailed(kind string)
}

type nopObserver struct{}

func (nopObserver) Acked(string, []time.Time) {}
func (nopObserver) DeadLettered(string)       {}
func (nopObserver) ProduceFailed(string)      {}
