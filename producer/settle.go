package producer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// settle reports a batch acknowledged, or keeps it among its partition's
// retries, or fails it in its transaction.
//
// A partition's batches out at once are answered in order. A failed batch
// waits in the partition's retries with its sequence, while its batches
// still out are answered: the acknowledged ones are done (the broker wrote
// their predecessors too, so the failed one's answer was lost), the
// refused ones join the retries behind it. Once none is out, the retries
// are sent again one at a time, each alone, before anything newer: a key's
// events keep their order, and the broker writes a batch sent twice once.
// A batch refused for its producer while alone (the broker lost the
// producer's state) renews the producer id, and the retries are stamped
// again under it; refused for what it is, it is salvaged message by
// message (salvageBatch).
func (s *sender) settle(b batch, err error) {
	if err == nil {
		s.acknowledged(b)
		return
	}
	s.failed(b, err)
}

// acknowledged settles b written. The fates are queued before the
// partition stops counting b (partition.acknowledged): a key that moves
// to a new partition once this one drains (see route) has its later
// events acknowledged after these, not before.
func (s *sender) acknowledged(b batch) {
	w := s.w
	w.health.up()
	w.acked(b.msgs)
	if b.solo != nil {
		s.handOver(b.p.aloneEnded(b, nil))
		return
	}
	st := b.p.acknowledged(w, b)
	b.p.report(w)
	s.after(b.p, st)
}

// after does what settling a batch of p left to do: start the salvage of
// its first retry, wake the sender now carrying p.
func (s *sender) after(p *partition, st settled) {
	if st.salvages {
		s.w.owned.Go(func() { s.w.salvageBatch(p, st.salvage) })
	}
	s.handOver(st.to)
}

// failed settles b refused or unanswered: it fails its transaction, or
// joins its partition's retries (see settle).
func (s *sender) failed(b batch, err error) {
	w := s.w
	p := b.p
	// A refusal for the producer of a batch sent beside others may only
	// echo an earlier batch's failure (its sequence then has a gap): it
	// is sent again alone before the refusal counts, in a transaction too.
	echo := !b.alone && b.h.ProducerID >= 0 && fenced(err)
	if !echo {
		if terr := w.refusedInTransaction(err); terr != nil { // tells the transaction: it must abort
			if b.solo != nil {
				s.handOver(p.aloneEnded(b, terr))
				w.health.refused(terr, "produce to %s/%d in a transaction: %v", p.tp.topic, p.tp.id, terr)
				return
			}
			s.failInTransaction(b, terr)
			return
		}
	}
	perr := Classify(err)
	perr.Topic = p.tp.topic
	if b.h.ProducerID >= 0 && fenced(err) {
		// The same batch again, under a new producer id if the broker
		// refused it alone; beside others, the refusal may only echo an
		// earlier batch's, and it is sent again alone first.
		perr.Transient = true
		if b.alone {
			if rerr := w.refence(p, b.h, err); rerr != nil {
				err = rerr
			}
		}
	}
	abandoned := w.abandon.Err() != nil
	if b.solo != nil && (abandoned || !perr.Transient) { // its salvage decides
		s.handOver(p.aloneEnded(b, perr))
		return
	}
	perr.Transient = perr.Transient || abandoned // dropped by next, not salvaged
	moved := leaderMoved(err) || disconnected(err)
	attempt := s.requeue(b, perr, moved)
	if !abandoned {
		w.health.failed(err, "produce %d messages to %s/%d (attempt %d): %v", len(b.msgs), p.tp.topic, p.tp.id, attempt, err)
	}
	if moved && !abandoned {
		w.followLeader(p.tp.topic)
	}
}

// requeue puts b, failed for perr, among its partition's retries
// (partition.requeue). It returns the partition's failures in a row, for
// the log.
func (s *sender) requeue(b batch, perr *Error, moved bool) (attempt int) {
	st := b.p.requeue(s.w, b, perr, moved)
	s.after(b.p, st)
	return st.attempt
}

// followLeader asks where topic's partitions lead now, in the background,
// so that a batch whose leader moved follows it (lookup reassigns the
// partition) before its retry is due.
func (w *Writer) followLeader(topic string) {
	w.owned.Go(func() {
		ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
		defer cancel()
		_, _ = w.lookup(ctx, topic)
	})
}

// salvageBatch salvages b, p's first retry, which the broker refused for
// what it is (see partition.afterSettle): its messages go one by one,
// then p goes on, or stops at the first that failed for good.
func (w *Writer) salvageBatch(p *partition, b batch) {
	failed := w.salvage(b)
	to, stoppedNow := p.salvaged(b, failed)
	p.report(w)
	if stoppedNow {
		w.log.Warn("an event failed for good: later events of its partition are not sent", slog.String("topic", p.tp.topic),
			slog.Int("partition", p.tp.id), slog.Any("err", failed))
	}
	if to != nil {
		to.signal()
	}
}

// leaderMoved reports whether err says a partition's leader is not where
// the writer thinks: the broker's answer, or kafka-go's transport refusing
// to route a request sent through it (*rawproduce.Error): its own
// metadata already saw the move (or the topic or partition
// gone), which the writer's has yet to learn.
func leaderMoved(err error) bool {
	return errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable) ||
		errors.Is(err, kafka.UnknownTopicOrPartition) || errors.As(err, new(*rawproduce.Error))
}

// disconnected reports whether err is no answer from the broker at all
// (a connection refused, reset or closed, a request that could not be
// written): the most common reason is a dead leader, whose partitions
// moved. The Java producer asks for metadata after a disconnection, as
// after NOT_LEADER; the writer's own cache of leaders would otherwise keep
// the retries dialing the dead broker until it expires.
func disconnected(err error) bool {
	return err != nil && !errors.As(err, new(kafka.Error))
}

// handOver wakes to, the sender that now carries a partition, when the
// partition moved to another broker's sender while its batch was out:
// that sender skipped it as busy and may be idle, and nothing else would
// wake it for it. (This sender asks for its next request anyway once the
// answer is settled.)
func (s *sender) handOver(to *sender) {
	if to != nil && to != s {
		to.signal()
	}
}

// relocate asks where p's leader is now (lookup reassigns p to its
// sender), then lets p's first retry go.
func (w *Writer) relocate(p *partition) {
	ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
	_, _ = w.lookup(ctx, p.tp.topic)
	cancel()
	if s := p.relocated(); s != nil {
		s.signal()
	}
}
