package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// sender carries every partition one broker leads. It keeps one produce
// request in flight, and that request holds a batch of every partition
// with messages waiting, as the Java producer does: per request the broker
// does much the same work whether it carries one record or a thousand, so
// a trickle of events spread over many partitions costs it one request per
// round, not one per partition.
//
// Requests are paced, not delayed: a request leaves at once when the
// previous one left at least BatchTimeout ago, so an event after a quiet
// spell waits for nothing; while events keep coming, requests leave at most
// once per BatchTimeout (or as soon as a partition has a full batch), and
// each carries what gathered meanwhile. Latency is bounded by BatchTimeout
// plus a round trip, and the broker sees at most 1/BatchTimeout requests a
// second from a relay that keeps up.
type sender struct {
	w      *Writer
	broker int32
	wake   chan struct{} // capacity 1

	// Guarded by w.mu.
	parts   []*partition
	idle    bool      // waiting for any message: enqueue wakes it
	pacing  bool      // waiting out BatchTimeout: a full batch wakes it
	last    time.Time // when its last request left
	stopped bool
}

func (s *sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) remove(p *partition) {
	if i := slices.Index(s.parts, p); i >= 0 {
		s.parts = slices.Delete(s.parts, i, i+1)
	}
}

// batch is one partition's part of a request.
type batch struct {
	p    *partition
	msgs []kafka.Message
	h    producer.BatchHeader // its producer fields in this request (see stamp)
}

// run sends until the writer closes and nothing of this broker's is left.
func (s *sender) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batches, wait, stop := s.next()
		if stop {
			return
		}
		if len(batches) > 0 {
			s.send(batches)
			continue
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-s.wake:
				timer.Stop()
			case <-timer.C:
			}
		} else {
			<-s.wake
		}
	}
}

// next returns the batches of the next request, or how long to wait before
// asking again (0: until woken), or stop once the writer is closed and no
// partition of this broker holds anything.
func (s *sender) next() (batches []batch, wait time.Duration, stop bool) {
	w := s.w
	var failed []dropped // reported outside the lock
	defer func() {
		for _, d := range failed {
			for i := range d.msgs {
				m := d.msgs[i].WriterData.(meta)
				w.done(m.token, m.reason, d.err)
			}
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	s.idle, s.pacing = false, false
	now := time.Now()
	closing, abandoned := w.closed.Load(), w.abandon.Err() != nil
	var ready []*partition
	var nextRetry time.Time
	pending, full := false, false
	for _, p := range s.parts {
		if p.busy {
			pending = true
			continue
		}
		if p.retry == nil && len(p.buf) == 0 {
			continue
		}
		if abandoned || p.stopped != nil {
			failed = append(failed, drop(p))
			continue
		}
		pending = true
		if p.retry != nil && now.Before(p.retryAt) {
			if nextRetry.IsZero() || p.retryAt.Before(nextRetry) {
				nextRetry = p.retryAt
			}
			continue
		}
		ready = append(ready, p)
		full = full || w.full(p)
	}
	switch {
	case !pending && closing:
		s.stopped = true
		delete(w.senders, s.broker)
		return nil, 0, true
	case len(ready) == 0:
		s.idle = true
		if !nextRetry.IsZero() {
			return nil, max(nextRetry.Sub(now), time.Millisecond), false
		}
		return nil, 0, false
	case !full && !closing && !w.flushing.Load() && now.Sub(s.last) < w.cfg.BatchTimeout:
		s.idle, s.pacing = false, true
		wait = w.cfg.BatchTimeout - now.Sub(s.last)
		if !nextRetry.IsZero() {
			wait = min(wait, max(nextRetry.Sub(now), time.Millisecond))
		}
		return nil, wait, false
	}
	batches = make([]batch, 0, len(ready))
	for _, p := range ready {
		p.busy = true
		batches = append(batches, batch{p: p, msgs: w.take(p)})
	}
	s.last = now
	return batches, 0, false
}

// dropped is what a partition held, reported failed with err.
type dropped struct {
	msgs []kafka.Message
	err  error
}

// drop takes everything p holds, once the writer is abandoned or p stopped.
// Called with mu held.
func drop(p *partition) dropped {
	var err error = &Error{Topic: p.tp.topic, Err: errors.New("writer closed before the broker acknowledged it")}
	if p.stopped != nil {
		err = heldBack(p.tp.topic, p.stopped)
	}
	d := dropped{msgs: slices.Concat(p.retry, p.buf), err: err}
	p.retry, p.buf, p.bytes = nil, nil, 0
	return d
}

// send makes one produce request of batches, acks=all, and settles each
// partition's batch by its own answer: acknowledged, retried alone after a
// backoff (a retriable error), or salvaged message by message (a permanent
// one).
func (s *sender) send(batches []batch) {
	w := s.w
	err := w.hold() // abandoned while held: nothing more goes out
	if err == nil {
		err = w.ensureSession()
	}
	var req *rawproduce.Request
	records := 0
	if err == nil {
		if req, records, err = w.produceRequest(batches); err != nil && w.refusedInTransaction(err) == nil {
			err = &Error{Err: err}
		}
	}
	if err != nil {
		for _, b := range batches {
			s.settle(b, err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(w.abandon, produceTimeout+5*time.Second)
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, req)
	cancel()
	w.cfg.Observer.Request(len(batches), records)
	errs := make([]error, len(batches))
	if err == nil {
		codes := answers(res.(*produceAPI.Response))
		for i, b := range batches {
			code, ok := codes[b.p.tp]
			switch {
			case !ok:
				errs[i] = fmt.Errorf("no answer for partition %d: %w", b.p.tp.id, protocol.ErrNoPartition)
			case code != 0:
				errs[i] = kafka.Error(code)
			}
		}
	} else {
		for i := range errs {
			errs[i] = err
		}
	}
	for i, b := range batches {
		s.settle(b, errs[i])
	}
}

// settle reports a batch acknowledged, or puts it back for a retry, or
// hands it to salvage.
func (s *sender) settle(b batch, err error) {
	w := s.w
	if err == nil {
		// The fates are reported while the partition is still busy: a key
		// that moves to a new partition once this one drains (see route)
		// has its later events acknowledged after these, not before.
		w.health.up()
		w.acked(b.msgs)
		for i := range b.msgs {
			m := b.msgs[i].WriterData.(meta)
			w.done(m.token, m.reason, nil)
		}
		w.mu.Lock()
		b.p.advance(b.h, len(b.msgs))
		b.p.busy, b.p.attempt = false, 0
		s.handOver(b.p)
		w.mu.Unlock()
		return
	}
	if terr := w.refusedInTransaction(err); terr != nil {
		s.failInTransaction(b, terr)
		return
	}
	perr := classify(err)
	perr.Topic = b.p.tp.topic
	if b.h.ProducerID >= 0 && fenced(err) {
		// The same batch again, under a new producer id if need be.
		perr.Transient = true
		if rerr := w.refence(b.p, b.h, err); rerr != nil {
			err = rerr
		}
	}
	if !perr.Transient && w.abandon.Err() == nil {
		// The partition stays busy while its messages are settled one by
		// one, so none of its later messages overtakes them; its sequence
		// is theirs meanwhile (see salvaged).
		w.mu.Lock()
		b.p.salvaging = true
		w.mu.Unlock()
		w.owned.Go(func() {
			failed := w.salvage(b.msgs, b.p.tp.id, perr)
			b.p.oneByOne.Lock()
			defer b.p.oneByOne.Unlock()
			w.mu.Lock()
			b.p.busy, b.p.salvaging = false, false
			if failed != nil && b.p.stopped == nil {
				b.p.stopped = failed
				w.log.Warn("an event failed for good: later events of its partition are not sent", slog.String("topic", b.p.tp.topic),
					slog.Int("partition", b.p.tp.id), slog.Any("err", failed))
			}
			if s := w.senders[b.p.leader]; s != nil {
				s.signal()
			}
			w.mu.Unlock()
		})
		return
	}
	w.mu.Lock()
	b.p.busy, b.p.retry = false, b.msgs
	b.p.retryAt = time.Now().Add(backoff.Delay(b.p.attempt, backoffMin, backoffMax))
	b.p.attempt++
	attempt := b.p.attempt
	s.handOver(b.p)
	w.mu.Unlock()
	if w.abandon.Err() == nil {
		w.health.failed(err, "produce %d messages to %s/%d (attempt %d): %v", len(b.msgs), b.p.tp.topic, b.p.tp.id, attempt, err)
	}
	if leaderMoved(err) {
		// Ask where to, so that the batch follows it (lookup reassigns
		// the partition) before its retry is due.
		topic := b.p.tp.topic
		w.owned.Go(func() {
			ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
			defer cancel()
			_, _ = w.lookup(ctx, topic)
		})
	}
}

// leaderMoved reports whether err says a partition's leader is not where
// the writer thinks: the broker's answer, or kafka-go's transport refusing
// to route the request (*rawproduce.Error): its own metadata already saw
// the move (or the topic or partition gone), which the writer's has yet to
// learn.
func leaderMoved(err error) bool {
	return errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable) ||
		errors.Is(err, kafka.UnknownTopicOrPartition) || errors.As(err, new(*rawproduce.Error))
}

// handOver wakes the sender that now carries p, when p moved to another
// broker's sender while its batch was out: that sender skipped p as busy
// and may be idle, and nothing else would wake it for p. (This sender asks
// for its next request anyway once send returns.) Called with mu held.
func (s *sender) handOver(p *partition) {
	if to := s.w.senders[p.leader]; to != nil && to != s {
		to.signal()
	}
}
