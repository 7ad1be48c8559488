package producer

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
)

// partition is one topic partition's queue, and the one owner of
// everything about it: its messages waiting, its batches out and to retry,
// its sequence, its salvage and the order of its reports. Its mu guards all
// of it and is locked only by the methods in this file, which never call
// Done, block on I/O or start a goroutine under it (but a new sender's,
// under the index's lock: see index.senderFor).
//
// Lock order: a partition's mu, then the index's mu (index.go) or a
// sender's mu (sender.go), one at a time; never the other way round. The
// routes' mu (routes.go) and the producer identity's (idempotence.go, its
// renew then its mu) are taken under no other. A sender copies its partitions' list and looks at each
// under its own lock, not under the sender's.
//
// Its batches out at once are on one connection, in sequence order, and a
// failed batch is sent again before anything newer of its partition (see
// settle), so a retried batch can never be overtaken by later messages of
// its keys.
type partition struct {
	tp topicPartition

	mu    sync.Mutex
	state // guarded by mu
}

// push queues msg, whose partition's leader is leader as of at (the
// lookup its routing read), and returns the sender to tell of it and
// whether a full batch waits now. It fails once the writer is closed: checked
// under mu, so that a sender, which stops only once the writer is closed
// and its partitions are empty (looked at under their mu), never leaves
// a message behind.
//
// A lookup that moved p since at (follow) knows its leader better: p
// stays with it, or a stale routing would move p back to a broker that
// no longer leads it.
//
// A salvage's dead letter (owned: from a goroutine Close waits for) is
// queued after Close too: p's sender is then kept from stopping (keep),
// or p gets a new one.
func (p *partition) push(w *Writer, msg Outgoing, leader int32, at time.Time, owned bool) (to *sender, full bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	closed := w.closed.Load()
	if closed && !owned {
		return nil, false, errClosed(msg.Topic)
	}
	if at.Before(p.leaderAt) {
		leader, at = p.leader, p.leaderAt
	}
	if p.sender == nil || leader != p.leader || closed && !p.sender.keep() {
		p.assign(w, leader, at, owned)
	}
	if p.sender == nil {
		return nil, false, errClosed(msg.Topic)
	}
	if len(p.buf) == 0 {
		p.since = time.Now()
	}
	p.buf = append(p.buf, msg)
	p.bytes += recordSize(&msg) + batchOverhead
	return p.sender, p.full(w), nil
}

// follow moves p to leader's sender once metadata answered at says it
// leads p, unless p was assigned by a later answer.
func (p *partition) follow(w *Writer, leader int32, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if at.Before(p.leaderAt) {
		return
	}
	if p.leader == leader {
		p.leaderAt = at
		return
	}
	// Pending, p's old sender runs (it stops only once p is empty), so a
	// new one may be counted in owned even if Close waits for it.
	p.assign(w, leader, at, p.pending())
}

// assign moves p to leader's sender, made if need be, as metadata
// answered at says.
func (p *partition) assign(w *Writer, leader int32, at time.Time, owned bool) {
	for {
		s := w.index.senderFor(w, leader, owned)
		if s == nil {
			return // closed, and nothing of p's to carry
		}
		if s.add(p) {
			if old := p.sender; old != nil && old != s {
				// The old sender may be parked on p (holding it while a
				// lookup relocates it, say) and carry nothing else: woken,
				// it sees p gone, and stops once the writer is closed,
				// rather than keeping Close waiting for it.
				old.remove(p)
				old.signal()
			}
			p.sender, p.leader, p.leaderAt = s, leader, at
			p.outConn = nil // its batches out stay on the old connection: none joins them
			s.wakeUp()
			return
		}
		w.index.retired(s) // it stopped meanwhile
	}
}

// look is what a sender sees of itself while it looks at its partitions.
type look struct {
	s         *sender
	conn      *Conn // the sender's connection, nil if none
	now       time.Time
	rtt       time.Duration
	inflight  int  // its requests out
	closing   bool // the writer is closed: read before any partition is looked at
	abandoned bool
	idemOff   bool // batches carry no producer id
}

// sight is what a sender makes of a partition (scan).
type sight struct {
	v       verdict
	full    bool
	due     time.Time // sends: when, not full, it may go beside a request out
	retryAt time.Time // waits: when its first retry is due
}

// scan returns l.s's verdict on p. What p held is queued to report
// (report) when it drops it; its leader is asked again (relocate) when it
// relocates.
func (p *partition) scan(w *Writer, l *look) sight {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sender != l.s {
		return sight{v: idle} // moved to another sender meanwhile
	}
	sg := sight{v: p.consider(w, l)}
	switch sg.v {
	case drops:
		p.drop(p.tp.topic)
	case dropsAlone:
		b := p.retries[0]
		p.retries = slices.Delete(p.retries, 0, 1)
		b.solo <- &Error{Topic: p.tp.topic, Err: errors.New("writer closed while retrying")}
	case waits:
		sg.retryAt = p.retryAt
	case relocates:
		p.relocate, p.relocating = false, true
	case sends:
		sg.full = p.full(w)
		sg.due = p.dueAt(w, l.rtt)
	}
	return sg
}

// takeFor takes p's batch for l.s's next request, if p still sends one:
// beside a request out, only a full batch goes, or one that waited as
// long as it would have for its answer without pipelining (dueAt): the
// others wait and grow meanwhile (in a drain, a request taking every
// partition's few records at each full one cost 3 times the relay's CPU
// per event), but no longer (a backlog keeps a request out all the time).
func (p *partition) takeFor(w *Writer, l *look) (batch, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sender != l.s || p.consider(w, l) != sends {
		return batch{}, false
	}
	if l.inflight > 0 && !p.full(w) && !w.flushing.Load() && l.now.Before(p.dueAt(w, l.rtt)) {
		return batch{}, false
	}
	p.out++
	return p.take(w, p), true
}

// drained reports whether p holds nothing (pending).
func (p *partition) drained() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.pending()
}

// sent records that p's batch went out on conn.
func (p *partition) sent(conn *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outConn = conn
}

// reserve stamps b, p's batch, with p's sequence under st (see
// producerState.reserve).
func (p *partition) reserve(b *batch, st producerState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = st.reserve(b, p.seq)
}

// sendAlone puts msg, a message of p's salvaged batch of order, at the
// head of p's retries, alone in a batch of its own: p's sender sends it
// as any retry, under p's sequence, and its outcome (nil once written, or
// why not, for good) comes on the channel returned, not to Done. It
// returns the sender to wake.
func (p *partition) sendAlone(msg Outgoing, order uint64) (chan error, *sender) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := batch{p: p, msgs: []Outgoing{msg}, h: NoProducer, order: order, solo: make(chan error, 1)}
	p.retries = slices.Insert(p.retries, 0, b)
	p.retryAt = time.Time{}
	return b.solo, p.sender
}

// aloneEnded settles b, a message a salvage sent alone (sendAlone),
// written (err nil) or refused for good: its outcome goes to the salvage.
// Refused, the broker did not write b: its sequence goes to the next.
func (p *partition) aloneEnded(b batch, err error) *sender {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sq := p.seq; err == nil && sq != nil && b.h.ProducerID == sq.id && b.h.ProducerEpoch == sq.epoch {
		sq.ackedAt = time.Now()
	}
	if err != nil {
		p.seq.rewind(b)
	}
	p.ended(b)
	if err == nil {
		p.attempt = 0
	}
	b.solo <- err
	return p.sender
}

// refenced moves p to the producer identity st once the broker refused
// old for it (see refence).
func (p *partition) refenced(old session, st producerState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = st.refenced(p.seq, old)
}

// settled is what settling a batch leaves a partition's sender to do once
// it holds no lock: start a salvage, wake the sender now carrying it.
type settled struct {
	salvage  batch
	salvages bool
	to       *sender
	attempt  int // the partition's failures in a row
}

// acknowledged settles b written: its fates are queued in order, before
// p.out stops counting it, so that p stays pending until they are
// reported.
func (p *partition) acknowledged(w *Writer, b batch) settled {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue(p.reports.release(b))
	if sq := p.seq; sq != nil && b.h.ProducerID == sq.id && b.h.ProducerEpoch == sq.epoch {
		sq.ackedAt = time.Now()
	}
	p.ended(b)
	if b.alone || len(p.retries) == 0 { // progress: the next retry backs off afresh (joins waits for retryOut)
		p.attempt = 0
	}
	return p.afterSettle()
}

// requeue puts b, failed for perr, among p's retries, in p's order
// whatever order the failures arrive in (a request that could not leave
// fails before earlier ones out on a broken connection), as the Java
// producer's insertInSequenceOrder; the retry is due after a backoff
// grown by each failure in a row.
func (p *partition) requeue(w *Writer, b batch, perr *Error, moved bool) settled {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended(b) // b, first among the retries again, keeps the others waiting
	b.err = perr
	i, _ := slices.BinarySearchFunc(p.retries, b.order, func(r batch, order uint64) int { return cmp.Compare(r.order, order) })
	p.retries = slices.Insert(p.retries, i, b)
	p.retryAt = time.Now().Add(backoff.Delay(p.attempt, w.backoffMin, w.backoffMax))
	p.relocate = p.relocate || moved
	p.attempt++
	st := p.afterSettle()
	st.attempt = p.attempt
	return st
}

// refused settles b failed in its transaction with err: its fates are
// queued in order and p stops (nothing more is sent in a transaction that
// cannot commit).
func (p *partition) refused(b batch, err error) *sender {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.fate = err
	p.queue(p.reports.release(b))
	p.ended(b)
	if p.stopped == nil {
		p.stopped = err
	}
	return p.sender
}

// salvaged ends the salvage of b: p's order moves past it (its messages
// were reported one by one), the batches held behind it are queued to
// report, and p stops if failed (stoppedNow: for the first time).
func (p *partition) salvaged(b batch, failed error) (to *sender, stoppedNow bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reports.reported == b.order {
		p.reports.reported++
		p.queue(p.reports.flush())
	}
	p.salvaging = false
	if failed != nil && p.stopped == nil {
		p.stopped, stoppedNow = failed, true
	}
	return p.sender, stoppedNow
}

// relocated lets p's first retry go once its leader was asked again.
func (p *partition) relocated() *sender {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.relocating = false
	return p.sender
}

// deliver reports f, after the fates queued before it.
func (p *partition) deliver(w *Writer, f fate) {
	p.mu.Lock()
	p.fates = append(p.fates, f)
	p.mu.Unlock()
	p.report(w)
}

// report hands p's queued fates to Done, in order, unless another
// goroutine is doing so: that one reports these too before it stops.
// Done is called without p's lock.
func (p *partition) report(w *Writer) {
	p.mu.Lock()
	if p.reporting {
		p.mu.Unlock()
		return
	}
	p.reporting = true
	for len(p.fates) > 0 {
		fates := p.fates
		p.fates = nil
		p.mu.Unlock()
		for _, f := range fates {
			w.reportFate(f)
		}
		p.mu.Lock()
	}
	p.reporting = false
	p.mu.Unlock()
}

// leading returns the broker whose sender carries p (-1: none yet).
func (p *partition) leading() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader
}
