package producer

import "time"

// Observer is told what the writer's requests do, for metrics. Its
// methods are called from the writer's goroutines and must not block.
type Observer interface {
	// Acked reports one produce request acknowledged by the broker: the
	// records' topic and the commit time (Outgoing.Commit) of each record
	// in it but dead letters.
	Acked(topic string, commits []time.Time)
	// Request reports one produce request answered (or failed): how many
	// partitions and records it carried.
	Request(partitions, records int)
	// Sent reports n bytes written to a broker connection.
	Sent(n int)
	// ProduceFailed reports one failed produce attempt; kind is a short,
	// bounded name for the failure (a Kafka error code, or "network").
	ProduceFailed(kind string)
	// PartitionsChanged reports that topic's partition count changed.
	PartitionsChanged(topic string)
}

type nopObserver struct{}

func (nopObserver) Acked(string, []time.Time) {}
func (nopObserver) Request(int, int)          {}
func (nopObserver) Sent(int)                  {}
func (nopObserver) ProduceFailed(string)      {}
func (nopObserver) PartitionsChanged(string)  {}

// acked tells the observer about acknowledged records; dead letters are
// counted when they are made.
func (w *Writer) acked(msgs []Outgoing) {
	commits := make([]time.Time, 0, len(msgs))
	for i := range msgs {
		if msgs[i].Reason == "" {
			commits = append(commits, msgs[i].Commit)
		}
	}
	if len(commits) > 0 {
		w.cfg.Observer.Acked(msgs[0].Topic, commits)
	}
}
