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

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
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
	case !full && !closing && now.Sub(s.last) < w.cfg.BatchTimeout:
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
		batches = append(batches, batch{p, w.take(p)})
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
	if err := w.hold(); err != nil { // abandoned while held: nothing more goes out
		for _, b := range batches {
			s.settle(b, err)
		}
		return
	}
	req := &produceAPI.Request{Acks: int16(kafka.RequireAll), Timeout: int32(produceTimeout / time.Millisecond)}
	records := 0
	for _, b := range batches {
		rs := protocol.RecordSet{Attributes: protocol.Attributes(w.cfg.Compression) & 7, Records: recordReader(b.msgs)}
		part := produceAPI.RequestPartition{Partition: int32(b.p.tp.id), RecordSet: rs}
		records += len(b.msgs)
		if n := len(req.Topics); n > 0 && req.Topics[n-1].Topic == b.p.tp.topic {
			req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, part)
			continue
		}
		if i := slices.IndexFunc(req.Topics, func(t produceAPI.RequestTopic) bool { return t.Topic == b.p.tp.topic }); i >= 0 {
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, part)
			continue
		}
		req.Topics = append(req.Topics, produceAPI.RequestTopic{Topic: b.p.tp.topic, Partitions: []produceAPI.RequestPartition{part}})
	}
	ctx, cancel := context.WithTimeout(w.abandon, produceTimeout+5*time.Second)
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, req)
	cancel()
	w.cfg.Observer.Request(len(batches), records)
	errs := make([]error, len(batches))
	if err == nil {
		codes := map[topicPartition]int16{}
		for _, t := range res.(*produceAPI.Response).Topics {
			for _, p := range t.Partitions {
				codes[topicPartition{t.Topic, int(p.Partition)}] = p.ErrorCode
			}
		}
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
		w.mu.Lock()
		b.p.busy, b.p.attempt = false, 0
		s.handOver(b.p)
		w.mu.Unlock()
		w.up()
		w.acked(b.msgs)
		for i := range b.msgs {
			m := b.msgs[i].WriterData.(meta)
			w.done(m.token, m.reason, nil)
		}
		return
	}
	perr := classify(err)
	perr.Topic = b.p.tp.topic
	if !perr.Transient && w.abandon.Err() == nil {
		// The partition stays busy while its messages are settled one by
		// one, so none of its later messages overtakes them.
		w.owned.Go(func() {
			failed := w.salvage(b.msgs, perr)
			w.mu.Lock()
			b.p.busy = false
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
		w.produceFailed(err, "produce %d messages to %s/%d (attempt %d): %v", len(b.msgs), b.p.tp.topic, b.p.tp.id, attempt, err)
	}
	if errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable) ||
		errors.Is(err, kafka.UnknownTopicOrPartition) || errors.As(err, new(*produceAPI.Error)) {
		// The leader moved: ask where to, so that the batch follows it
		// (lookup reassigns the partition) before its retry is due.
		topic := b.p.tp.topic
		w.owned.Go(func() {
			ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
			defer cancel()
			_, _ = w.lookup(ctx, topic)
		})
	}
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

// recordReader presents msgs as kafka-go records.
func recordReader(msgs []kafka.Message) protocol.RecordReader {
	records := make([]kafka.Record, len(msgs))
	for i := range msgs {
		records[i] = kafka.Record{Time: msgs[i].Time, Key: kafka.NewBytes(msgs[i].Key), Value: kafka.NewBytes(msgs[i].Value), Headers: msgs[i].Headers}
	}
	return kafka.NewRecordReader(records...)
}

// produce sends msgs to one partition in a request of their own, acks=all,
// outside the senders: salvage's one-by-one retries use it while their
// partition is held busy.
func (w *Writer) produce(topic string, id int, msgs []kafka.Message) error {
	if err := w.hold(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(w.abandon, produceTimeout+5*time.Second)
	defer cancel()
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, &produceAPI.Request{
		Acks: int16(kafka.RequireAll), Timeout: int32(produceTimeout / time.Millisecond),
		Topics: []produceAPI.RequestTopic{{Topic: topic, Partitions: []produceAPI.RequestPartition{{
			Partition: int32(id),
			RecordSet: protocol.RecordSet{Attributes: protocol.Attributes(w.cfg.Compression) & 7, Records: recordReader(msgs)},
		}}}},
	})
	w.cfg.Observer.Request(1, len(msgs))
	if err != nil {
		return err
	}
	for _, t := range res.(*produceAPI.Response).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return kafka.Error(p.ErrorCode)
			}
			return nil
		}
	}
	return fmt.Errorf("no answer for %s/%d: %w", topic, id, protocol.ErrNoPartition)
}
