package sink

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// sender carries every partition one broker leads, over one connection
// of its own (producer.Conn). Each request holds a batch of every
// partition with messages waiting, as the Java producer's do: per request
// the broker does much the same work whether it carries one record or a
// thousand, so a trickle of events spread over many partitions costs it
// one request per round, not one per partition.
//
// Requests are paced, not delayed: a request leaves at once when the
// previous one left at least BatchTimeout ago, so an event after a quiet
// spell waits for nothing; while events keep coming, requests leave at most
// once per BatchTimeout (or as soon as a partition has a full batch), and
// each carries what gathered meanwhile. Latency is bounded by BatchTimeout
// plus a round trip, and the broker sees at most 1/BatchTimeout requests a
// second from a relay that keeps up.
//
// Up to MaxInFlightRequests requests are out at once, but only a full
// batch (a backlog) sends one while another is out: a trickle keeps one
// request in flight, as before pipelining. A partition's later batch joins
// those of its own that are out only on the same connection (the broker
// answers them in order) and from an idempotent producer (the broker
// refuses a batch whose predecessor it has not written, so none overtakes
// another); see settle for what a failure among them does.
type sender struct {
	w      *Writer
	broker int32
	wake   chan struct{}   // capacity 1
	out    chan requestOut // requests out, oldest first, to receive; capacity: depth

	// Guarded by w.mu.
	parts    []*partition
	idle     bool          // waiting for any message: enqueue wakes it
	pacing   bool          // waiting out BatchTimeout: a full batch wakes it
	last     time.Time     // when its last request left
	inflight int           // requests out
	rtt      time.Duration // the last request's round trip
	stopped  bool

	// Owned by run's goroutine.
	conn     *producer.Conn
	unwatch  func() bool // stops closing conn once the writer is abandoned
	lastUsed time.Time
}

// requestOut is a request on the sender's connection, awaiting its answer.
type requestOut struct {
	call    *producer.Call
	batches []batch
	sent    time.Time
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
	h    producer.BatchHeader // its producer fields (see stamp); NoProducer until stamped
	gen  uint32               // the generation of p's sequence that h was stamped in
	// alone: sent again with nothing else of its partition out, so that
	// its refusal is its own, not the echo of an earlier batch's.
	alone bool
	err   *Error // why it failed, while it waits in the partition's retries
	order uint64 // its place in its partition's reports (reports.go)
	// retried: sent again (taken from the partition's retries).
	retried bool
	fate    error // its fate once settled, while its report waits (reports.go)
}

// idleConn is how long a sender keeps its connection without a request:
// as long as kafka-go's Transport keeps an idle one.
const idleConn = 30 * time.Second

// run sends until the writer closes and nothing of this broker's is left,
// then closes its connection and its receiver.
func (s *sender) run() {
	defer func() {
		close(s.out)
		s.closeConn()
	}()
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
		if wait == 0 && s.conn != nil && s.quiet() {
			wait = max(idleConn-time.Since(s.lastUsed), time.Millisecond)
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-s.wake:
				timer.Stop()
			case <-timer.C:
				s.closeIdle()
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
			for _, f := range d {
				w.reportMessages(f.msgs, f.err)
			}
		}
	}()
	var relocate []*partition // asked outside the lock
	defer func() {
		for _, p := range relocate {
			w.owned.Go(func() { w.relocate(p) })
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	s.idle, s.pacing = false, false
	now := time.Now()
	closing, abandoned := w.closed.Load(), w.abandon.Err() != nil
	var ready []*partition
	var nextRetry time.Time
	pending, full := s.inflight > 0, false
	for _, p := range s.parts {
		v := s.consider(p, now, abandoned)
		pending = pending || v != idle && v != drops // what is dropped is settled now
		switch v {
		case drops:
			failed = append(failed, drop(p))
		case waits:
			if nextRetry.IsZero() || p.retryAt.Before(nextRetry) {
				nextRetry = p.retryAt
			}
		case relocates:
			p.relocate, p.relocating = false, true
			relocate = append(relocate, p)
		case sends:
			ready = append(ready, p)
			full = full || w.full(p) || s.inflight > 0 && !now.Before(s.dueAt(p))
		}
	}
	if !pending && closing {
		s.stopped = true
		delete(w.senders, s.broker)
		return nil, 0, true
	}
	if d, held := s.hold(ready, nextRetry, full, now, closing); held {
		return nil, d, false
	}
	batches = s.takeReady(ready, now)
	s.last = now
	return batches, 0, false
}

// hold reports whether the next request waits, and how long (0: until
// woken): nothing is ready (nextRetry, if not zero, is the first retry
// due), the pipeline is full, or pacing (see sender) holds what is ready
// but not full. It marks the sender idle or pacing, which decides what
// wakes it. The pacing rule is kept apart from next's walk to read as one
// decision; ready is read, never kept, so that next's list of them stays
// on its stack. Called with mu held.
func (s *sender) hold(ready []*partition, nextRetry time.Time, full bool, now time.Time, closing bool) (wait time.Duration, held bool) {
	w := s.w
	switch {
	case len(ready) == 0 || s.inflight >= w.depth:
		s.idle = s.inflight < w.depth
		if !nextRetry.IsZero() {
			return max(nextRetry.Sub(now), time.Millisecond), true
		}
		return 0, true
	case s.inflight > 0 && !full && !w.flushing.Load():
		s.pacing = true // the answer wakes the sender, or a full batch, or the first due
		wait = s.dueAt(ready[0]).Sub(now)
		for _, p := range ready[1:] {
			wait = min(wait, s.dueAt(p).Sub(now))
		}
		if !nextRetry.IsZero() {
			wait = min(wait, nextRetry.Sub(now))
		}
		return max(wait, time.Millisecond), true
	case !full && !closing && !w.flushing.Load() && now.Sub(s.last) < w.cfg.BatchTimeout:
		s.pacing = true
		wait = w.cfg.BatchTimeout - now.Sub(s.last)
		if !nextRetry.IsZero() {
			wait = min(wait, max(nextRetry.Sub(now), time.Millisecond))
		}
		return wait, true
	}
	return 0, false
}

// takeReady takes the batches of the request that leaves now: one of each
// ready partition, except those that must wait beside a request out.
// Called with mu held.
func (s *sender) takeReady(ready []*partition, now time.Time) []batch {
	w := s.w
	batches := make([]batch, 0, len(ready))
	for _, p := range ready {
		if s.inflight > 0 && !w.full(p) && !w.flushing.Load() && now.Before(s.dueAt(p)) {
			// Beside a request out, only full batches go, and those that
			// waited as long as they would have for its answer without
			// pipelining: the others wait and grow meanwhile (in a drain,
			// a request taking every partition's few records at each full
			// one cost 3 times the relay's CPU per event), but no longer
			// (a backlog keeps a request out all the time).
			continue
		}
		p.out++
		batches = append(batches, w.take(p))
	}
	return batches
}

// dueAt is when p's queue, not full, may go beside a request out: once it
// waited BatchTimeout and a round trip, as long as it would have waited
// for the request's answer without pipelining. Called with mu held.
func (s *sender) dueAt(p *partition) time.Time {
	return p.since.Add(s.w.cfg.BatchTimeout + s.rtt)
}

// A verdict is what the sender's next request makes of a partition.
type verdict int

const (
	idle      verdict = iota // nothing to send, nothing out
	holds                    // something out or waiting, nothing to send now
	drops                    // the writer abandoned or p stopped: what it holds fails
	waits                    // its first retry is not due before p.retryAt
	relocates                // its first retry is due: ask where its leader is first
	sends                    // a batch goes in the next request
)

// consider returns p's verdict. Called with mu held.
func (s *sender) consider(p *partition, now time.Time, abandoned bool) verdict {
	busy := p.busy()
	switch {
	case !busy && (abandoned || p.stopped != nil) && (len(p.retries) > 0 || len(p.buf) > 0 || len(p.reports.held) > 0):
		return drops
	case len(p.retries) == 0 && len(p.buf) == 0:
		if busy || len(p.reports.held) > 0 {
			return holds
		}
		return idle
	case len(p.retries) > 0 && busy:
		return holds // the first failed batch goes again alone
	case len(p.retries) > 0 && now.Before(p.retryAt):
		return waits
	case len(p.retries) > 0 && p.relocating:
		return holds
	case len(p.retries) > 0 && p.relocate:
		return relocates
	case busy && !s.joins(p):
		return holds
	}
	return sends
}

// joins reports whether p, with batches out, may send another beside them:
// a full one, on the connection its others are on, up to the writer's
// depth; none beside a batch sent again (retryOut), which must be written
// before anything newer: the broker recognises a batch sent twice only
// among the last 5 it wrote of the producer and partition. And only while
// the broker surely knows the producer on p: a batch of its session was
// acknowledged within pipelineAfterAck. A broker with no state for a producer id on a
// partition (a new id, or one it expired) writes its first batch whatever
// its sequence (KIP-360), so a batch sent beside a first one the broker
// refused would be written ahead of it. Never once idempotence is off (the
// broker gives no producer id any more): a batch without one is written
// whether or not an earlier one was. Called with mu held.
func (s *sender) joins(p *partition) bool {
	w := s.w
	return !p.salvaging && !p.retryOut && len(p.retries) == 0 && p.out < w.depth && p.outConn != nil && p.outConn == s.conn && !s.conn.Broken() &&
		!w.idem.off && p.seq != nil && time.Since(p.seq.ackedAt) < pipelineAfterAck &&
		len(p.buf) > 0 && (len(p.buf) >= w.cfg.BatchSize || p.bytes > w.batchBytes)
}

// pipelineAfterAck is how long after its last acknowledgement a
// partition's producer state is trusted to be on the broker: far below
// the broker's producer.id.expiration.ms (a day by default).
const pipelineAfterAck = time.Minute

// dropped is what a partition held, in its order: the batches whose
// reports waited for an earlier one's, the failed batches, then the
// queue, each with its fate.
type dropped []fate

// fate is messages' fate, to report.
type fate struct {
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
	for i := range p.retries {
		p.retries[i].fate = err
	}
	batches := slices.Concat(p.reports.held, p.retries)
	slices.SortFunc(batches, func(a, b batch) int { return cmp.Compare(a.order, b.order) })
	d := make(dropped, 0, len(batches)+1)
	for _, b := range batches {
		d = append(d, fate{msgs: b.msgs, err: b.fate})
	}
	d = append(d, fate{msgs: p.buf, err: err})
	p.reports.held, p.reports.reported = nil, p.reports.next
	p.retries, p.buf, p.bytes = nil, nil, 0
	return d
}
