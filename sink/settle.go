package sink

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
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
// message (salvageHead).
func (s *sender) settle(b batch, err error) {
	if err == nil {
		s.acknowledged(b)
		return
	}
	s.failed(b, err)
}

// acknowledged settles b written. The fates are reported while the
// partition is still busy: a key that moves to a new partition once this
// one drains (see route) has its later events acknowledged after these,
// not before.
func (s *sender) acknowledged(b batch) {
	w := s.w
	p := b.p
	w.health.up()
	w.acked(b.msgs)
	w.report(b)
	w.mu.Lock()
	if sq := p.seq; sq != nil && b.h.ProducerID == sq.id && b.h.ProducerEpoch == sq.epoch {
		sq.ackedAt = time.Now()
	}
	p.out--
	p.retryOut = p.retryOut && !b.retried
	if p.out == 0 {
		p.outConn = nil
	}
	if b.alone || len(p.retries) == 0 { // progress: the next retry backs off afresh (joins waits for retryOut)
		p.attempt = 0
	}
	w.salvageHead(p)
	s.handOver(p)
	w.mu.Unlock()
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
			s.failInTransaction(b, terr)
			return
		}
	}
	perr := classify(err)
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

// requeue puts b, failed for perr, among its partition's retries, in the
// partition's order whatever order the failures arrive in (a request that
// could not leave fails before earlier ones out on a broken connection),
// as the Java producer's insertInSequenceOrder; the retry is due after a
// backoff grown by each failure in a row. It returns the partition's
// failures in a row, for the log.
func (s *sender) requeue(b batch, perr *Error, moved bool) (attempt int) {
	w := s.w
	p := b.p
	w.mu.Lock()
	defer w.mu.Unlock()
	p.out--
	p.retryOut = p.retryOut && !b.retried // b, first among the retries again, keeps the others waiting
	if p.out == 0 {
		p.outConn = nil
	}
	b.err = perr
	i, _ := slices.BinarySearchFunc(p.retries, b.order, func(r batch, order uint64) int { return cmp.Compare(r.order, order) })
	p.retries = slices.Insert(p.retries, i, b)
	p.retryAt = time.Now().Add(backoff.Delay(p.attempt, backoffMin, backoffMax))
	p.relocate = p.relocate || moved
	p.attempt++
	attempt = p.attempt
	w.salvageHead(p)
	s.handOver(p)
	return attempt
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

// salvageHead starts the salvage of p's first retry once nothing of p is
// out, when the broker refused it for what it is: its messages go one by
// one (salvage), each dead-lettered if Kafka refuses it. The partition
// stays busy meanwhile, so none of its later messages overtakes them. The
// broker wrote none of the sequences stamped after the refused batch
// (each needs its predecessor written), so its own sequence goes to the
// salvage's messages, and the later retries are stamped again after them
// (a new generation). Called with mu held.
func (w *Writer) salvageHead(p *partition) {
	if p.out > 0 || p.salvaging || len(p.retries) == 0 || p.retries[0].err.Transient {
		return
	}
	b := p.retries[0]
	p.retries = slices.Delete(p.retries, 0, 1)
	if s := p.seq; s != nil && b.h.ProducerID == s.id && b.h.ProducerEpoch == s.epoch && b.gen == s.gen {
		s.next = b.h.BaseSequence
		s.gen++
	}
	p.salvaging = true
	perr := b.err
	w.owned.Go(func() {
		failed := w.salvage(b.msgs, p.tp.id, perr)
		w.resolved(b)
		p.oneByOne.Lock()
		defer p.oneByOne.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		p.salvaging = false
		if failed != nil && p.stopped == nil {
			p.stopped = failed
			w.log.Warn("an event failed for good: later events of its partition are not sent", slog.String("topic", p.tp.topic),
				slog.Int("partition", p.tp.id), slog.Any("err", failed))
		}
		if s := w.senders[p.leader]; s != nil {
			s.signal()
		}
	})
}

// leaderMoved reports whether err says a partition's leader is not where
// the writer thinks: the broker's answer, or kafka-go's transport refusing
// to route the request (*rawproduce.Error; salvage's requests go through
// it): its own metadata already saw the move (or the topic or partition
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

// handOver wakes the sender that now carries p, when p moved to another
// broker's sender while its batch was out: that sender skipped p as busy
// and may be idle, and nothing else would wake it for p. (This sender asks
// for its next request anyway once the answer is settled.) Called with mu
// held.
func (s *sender) handOver(p *partition) {
	if to := s.w.senders[p.leader]; to != nil && to != s {
		to.signal()
	}
}

// relocate asks where p's leader is now (lookup reassigns p to its
// sender), then lets p's first retry go.
func (w *Writer) relocate(p *partition) {
	ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
	_, _ = w.lookup(ctx, p.tp.topic)
	cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	p.relocating = false
	if s := w.senders[p.leader]; s != nil {
		s.signal()
	}
}
