package producer

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// sender carries every partition one broker leads, over one connection
// of its own (Conn). Each request holds a batch of every
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
	// state is whether it waits, and what wakes it (see enqueued, rest).
	state atomic.Int32

	// mu guards these; it is locked only in this file.
	mu      sync.Mutex
	parts   []*partition
	version uint64 // bumped at each change of parts
	// awaited: made for a partition not yet added (index.senderFor), it
	// does not stop meanwhile.
	awaited  bool
	inflight int           // requests out
	rtt      time.Duration // the last request's round trip
	stopped  bool

	// Owned by run's goroutine.
	last     time.Time // when its last request left
	conn     *Conn
	unwatch  func() bool // stops closing conn once the writer is abandoned
	lastUsed time.Time
	scratch  []*partition // parts, as run looks at them
	ready    []*partition
}

func newSender(w *Writer, broker int32) *sender {
	return &sender{w: w, broker: broker, wake: make(chan struct{}, 1), out: make(chan requestOut, w.depth), awaited: true}
}

// requestOut is a request on the sender's connection, awaiting its answer.
type requestOut struct {
	call    *Call
	batches []batch
	sent    time.Time
}

// add makes p one of s's partitions, unless s stopped (false).
func (s *sender) add(p *partition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.parts = append(s.parts, p)
	s.version++
	s.awaited = false
	return true
}

func (s *sender) remove(p *partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.parts, p); i >= 0 {
		s.parts = slices.Delete(s.parts, i, i+1)
		s.version++
	}
}

// members copies s's partitions into its scratch list, with their version.
func (s *sender) members() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scratch = append(s.scratch[:0], s.parts...)
	return s.version
}

// keep keeps s from stopping on the partitions it saw (a message is
// queued after Close), unless it stopped (false).
func (s *sender) keep() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.version++
	return true
}

// retire stops s (retired), unless its partitions changed since version
// (changed), or it awaits its first (awaited: add wakes it).
func (s *sender) retire(version uint64) (retired, awaited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.awaited || s.version != version {
		return false, s.awaited
	}
	s.stopped = true
	return true, false
}

// outstanding returns the requests s has out and its last round trip.
func (s *sender) outstanding() (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight, s.rtt
}

// wentOut counts a request out, and returns how many are.
func (s *sender) wentOut() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight++
	return s.inflight
}

// answered counts a request answered after rtt.
func (s *sender) answered(rtt time.Duration) {
	s.mu.Lock()
	s.inflight--
	s.rtt = rtt
	s.mu.Unlock()
	s.w.index.sending(0, rtt)
}

// batch is one partition's part of a request.
type batch struct {
	p    *partition
	msgs []Outgoing
	h    BatchHeader // its producer fields (see stamp); NoProducer until stamped
	gen  uint32      // the generation of p's sequence that h was stamped in
	// alone: sent again with nothing else of its partition out, so that
	// its refusal is its own, not the echo of an earlier batch's.
	alone bool
	err   *Error // why it failed, while it waits in the partition's retries
	order uint64 // its place in its partition's reports (reports.go)
	// retried: sent again (taken from the partition's retries).
	retried bool
	// solo, for a message a salvage sends alone (partition.sendAlone),
	// gets its outcome instead of Done; nil for any other batch.
	solo chan error
	fate error // its fate once settled, while its report waits (reports.go)
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
	for {
		s.state.Store(working)
		// Read before the partitions are: one that is empty then takes no
		// message after it (partition.push), so none is left behind.
		l := s.look()
		version := s.members()
		ready, due, nextRetry, pending, full := s.scanAll(&l)
		if !pending && l.closing {
			retired, awaited := s.retire(version)
			if awaited {
				return nil, 0, false // until add wakes it
			}
			if !retired {
				continue // a partition came meanwhile
			}
			w.index.retired(s)
			return nil, 0, true
		}
		wait, to, held := s.hold(&l, len(ready) > 0, due, nextRetry, full)
		if held {
			if to != working && !s.rest(to) {
				continue // a message came meanwhile
			}
			return nil, wait, false
		}
		if batches = s.takeReady(&l, ready); len(batches) == 0 {
			continue // they changed meanwhile
		}
		s.last = l.now
		return batches, 0, false
	}
}

// look is what s knows of itself as it looks at its partitions.
func (s *sender) look() look {
	w := s.w
	inflight, rtt := s.outstanding()
	return look{s: s, conn: s.conn, now: time.Now(), rtt: rtt, inflight: inflight, closing: w.closed.Load(),
		abandoned: w.abandon.Err() != nil, idemOff: w.idem.state(false).off}
}

// scanAll looks at each of s's partitions: those ready to send, the first
// ready one due beside a request out (due), the first retry due (zero if
// none), whether any holds anything, or a full batch (or one due beside a
// request out). What a partition dropped is reported, and a partition
// that must ask where its leader is asks.
func (s *sender) scanAll(l *look) (ready []*partition, due, nextRetry time.Time, pending, full bool) {
	w := s.w
	pending = l.inflight > 0
	ready = s.ready[:0]
	for _, p := range s.scratch {
		sg := p.scan(w, l)
		pending = pending || sg.v != idle && sg.v != drops // what is dropped is settled now
		switch sg.v {
		case drops:
			p.report(w)
		case waits:
			if nextRetry.IsZero() || sg.retryAt.Before(nextRetry) {
				nextRetry = sg.retryAt
			}
		case relocates:
			w.owned.Go(func() { w.relocate(p) })
		case sends:
			ready = append(ready, p)
			full = full || sg.full || l.inflight > 0 && !l.now.Before(sg.due)
			if due.IsZero() || sg.due.Before(due) {
				due = sg.due
			}
		}
	}
	s.ready = ready
	return ready, due, nextRetry, pending, full
}

// hold reports whether the next request waits, and how long (0: until
// woken): nothing is ready (nextRetry, if not zero, is the first retry
// due), the pipeline is full, or pacing (see sender) holds what is ready
// (due: the first of it due beside a request out) but not full. It says what wakes the sender meanwhile (to): any message
// (idling), a full batch (pacing), or only an answer or its timer
// (working).
func (s *sender) hold(l *look, ready bool, due, nextRetry time.Time, full bool) (wait time.Duration, to int32, held bool) {
	w := s.w
	now := l.now
	switch {
	case !ready || l.inflight >= w.depth:
		to = working
		if l.inflight < w.depth {
			to = idling
		}
		if !nextRetry.IsZero() {
			return max(nextRetry.Sub(now), time.Millisecond), to, true
		}
		return 0, to, true
	case l.inflight > 0 && !full && !w.flushing.Load():
		// the answer wakes the sender, or a full batch, or the first due
		wait = due.Sub(now)
		if !nextRetry.IsZero() {
			wait = min(wait, nextRetry.Sub(now))
		}
		return max(wait, time.Millisecond), pacing, true
	case !full && !l.closing && !w.flushing.Load() && now.Sub(s.last) < w.cfg.BatchTimeout:
		wait = w.cfg.BatchTimeout - now.Sub(s.last)
		if !nextRetry.IsZero() {
			wait = min(wait, max(nextRetry.Sub(now), time.Millisecond))
		}
		return wait, pacing, true
	}
	return 0, working, false
}

// takeReady takes the batches of the request that leaves now: one of each
// ready partition, except those that must wait beside a request out
// (partition.takeFor).
func (s *sender) takeReady(l *look, ready []*partition) []batch {
	batches := make([]batch, 0, len(ready))
	for _, p := range ready {
		if b, ok := p.takeFor(s.w, l); ok {
			batches = append(batches, b)
		}
	}
	return batches
}

// A verdict is what the sender's next request makes of a partition.
type verdict int

const (
	idle       verdict = iota // nothing to send, nothing out
	holds                     // something out or waiting, nothing to send now
	drops                     // the writer abandoned or p stopped: what it holds fails
	waits                     // its first retry is not due before p.retryAt
	relocates                 // its first retry is due: ask where its leader is first
	sends                     // a batch goes in the next request
	dropsAlone                // the writer abandoned: a salvage's message sent alone fails
)

// pipelineAfterAck is how long after its last acknowledgement a
// partition's producer state is trusted to be on the broker: far below
// the broker's id.expiration.ms (a day by default).
const pipelineAfterAck = time.Minute
