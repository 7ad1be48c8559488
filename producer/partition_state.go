package producer

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// state is a partition's state: plain data, and the decisions taken over
// it, which neither lock, block nor call out. The partition's lock
// guards it (partition.go), and its methods there are the only callers
// of these.
type state struct {
	leader int32   // the broker whose sender carries this partition
	sender *sender // that broker's sender; nil until the first event
	// leaderAt is when the metadata answer that named leader was read
	// (topicCount.at): an older one does not move p (push, follow).
	leaderAt time.Time
	buf      []Outgoing // waiting, oldest first
	bytes    int        // their weight against batchBytes
	since    time.Time  // when buf's oldest message was queued, or later (see dueAt)
	// out counts its batches in requests not yet answered, all on
	// outConn (see joins).
	out     int
	outConn *Conn
	// retries are its failed batches, oldest first, each with its
	// sequence: sent again one at a time, alone, before anything newer.
	retries []batch
	attempt int // consecutive failed attempts
	// retryOut: a batch sent again is out; nothing joins it (joins).
	retryOut bool
	retryAt  time.Time // the first retry not before this (backoff)
	// relocate: the first retry failed because the leader moved; once it
	// is due, the leader is asked again (relocating) before it is sent, so
	// that it goes where the leader is by then, not where it was.
	relocate, relocating bool
	// stopped is the failure of an event that could not be published nor
	// dead-lettered: the stream stops at it, so nothing after it in this
	// partition is sent (see salvage); what is queued is reported failed.
	stopped error
	// seq is the partition's producer session and next base sequence
	// (idempotence.go); nil until its first idempotent batch. A batch's
	// sequence is taken when it is first sent; a retry carries the same.
	seq *sequence
	// salvaging: a salvage sends the busy partition's batch message by
	// message; only it sends for the partition meanwhile.
	salvaging bool
	// reports orders the fates of its batches (reports.go); fates are
	// those due, handed to Done by one goroutine at a time (reporting).
	reports   reports
	fates     []fate
	reporting bool
}

// consider returns p's verdict for the sender looking (l).
func (p *state) consider(w *Writer, l *look) verdict {
	if p.salvaging && p.out == 0 && len(p.retries) > 0 && p.retries[0].solo != nil {
		return p.considerAlone(l) // a message the salvage sends alone
	}
	busy := p.busy()
	switch {
	case !busy && (l.abandoned || p.stopped != nil) && (len(p.retries) > 0 || len(p.buf) > 0 || len(p.reports.held) > 0):
		return drops
	case len(p.retries) == 0 && len(p.buf) == 0:
		if busy || len(p.reports.held) > 0 {
			return holds
		}
		return idle
	case len(p.retries) > 0 && busy:
		return holds // the first failed batch goes again alone
	case len(p.retries) > 0 && l.now.Before(p.retryAt):
		return waits
	case len(p.retries) > 0 && p.relocating:
		return holds
	case len(p.retries) > 0 && p.relocate:
		return relocates
	case busy && !p.joins(w, l):
		return holds
	}
	return sends
}

// considerAlone returns the verdict on p's first retry, a message of a
// salvage sent alone (sendAlone): a retry like any other, but failed to
// the salvage, not dropped, once the writer is abandoned.
func (p *state) considerAlone(l *look) verdict {
	switch {
	case l.abandoned:
		return dropsAlone
	case l.now.Before(p.retryAt):
		return waits
	case p.relocating:
		return holds
	case p.relocate:
		return relocates
	}
	return sends
}

// joins reports whether p, with batches out, may send another beside them:
// a full one, on the connection its others are on, up to the writer's
// depth; none beside a batch sent again (retryOut), which must be written
// before anything newer: the broker recognises a batch sent twice only
// among the last 5 it wrote of the producer and partition. And only while
// the broker surely knows the producer on p: a batch of its session was
// acknowledged within pipelineAfterAck. A broker with no state for a
// producer id on a partition (a new id, or one it expired) writes its
// first batch whatever its sequence (KIP-360), so a batch sent beside a
// first one the broker refused would be written ahead of it. Never once
// idempotence is off (the broker gives no producer id any more): a batch
// without one is written whether or not an earlier one was.
func (p *state) joins(w *Writer, l *look) bool {
	return !p.salvaging && !p.retryOut && len(p.retries) == 0 && p.out < w.depth && p.outConn != nil && p.outConn == l.conn && !l.conn.Broken() &&
		!l.idemOff && p.seq != nil && time.Since(p.seq.ackedAt) < pipelineAfterAck &&
		len(p.buf) > 0 && (len(p.buf) >= w.cfg.BatchSize || p.bytes > w.batchBytes)
}

// busy reports whether p has a batch out, or a salvage holds it.
func (p *state) busy() bool { return p.out > 0 || p.salvaging }

// pending reports whether p holds anything: queued, out, to retry, or
// fates not yet reported. A topic is drained once none of its partitions
// is pending (see route): fates are reported before a key moves on.
func (p *state) pending() bool {
	return len(p.buf) > 0 || p.busy() || len(p.retries) > 0 || len(p.reports.held) > 0 || len(p.fates) > 0 || p.reporting
}

// full reports whether p has a full batch waiting: then its sender does
// not wait for more.
func (p *state) full(w *Writer) bool {
	return len(p.retries) > 0 || len(p.buf) >= w.cfg.BatchSize || p.bytes > w.batchBytes
}

// dueAt is when p's queue, not full, may go beside a request out: once it
// waited BatchTimeout and a round trip, as long as it would have waited
// for the request's answer without pipelining.
func (p *state) dueAt(w *Writer, rtt time.Duration) time.Time {
	return p.since.Add(w.cfg.BatchTimeout + rtt)
}

// take returns p's next batch: its first failed one again (with its
// sequence), or up to BatchSize messages and about batchBytes from its
// queue (stamped when the request is made), once p.out counts it.
func (p *state) take(w *Writer, owner *partition) batch {
	if len(p.retries) > 0 {
		b := p.retries[0]
		p.retries = slices.Delete(p.retries, 0, 1)
		b.err, b.alone, b.retried = nil, p.out == 1, true
		p.retryOut = true
		return b
	}
	size, count := 0, 0
	for count < len(p.buf) && count < w.cfg.BatchSize {
		n := recordSize(&p.buf[count]) + batchOverhead
		if count > 0 && size+n > w.batchBytes {
			break
		}
		size += n
		count++
	}
	p.bytes -= size
	msgs := make([]Outgoing, count)
	copy(msgs, p.buf)
	rest := copy(p.buf, p.buf[count:])
	clear(p.buf[rest:])
	p.buf = p.buf[:rest]
	if rest > 0 {
		p.since = time.Now() // the rest came later: counted from now, they wait at most a round more
	}
	p.reports.next++
	return batch{p: owner, msgs: msgs, h: NoProducer, alone: p.out == 1, order: p.reports.next - 1}
}

// drop queues the fates of everything p holds, in its order, once the
// writer is abandoned or p stopped: the batches whose reports waited for
// an earlier one's, the failed batches, then the queue.
func (p *state) drop(topic string) {
	var err error = &Error{Topic: topic, Err: errors.New("writer closed before the broker acknowledged it")}
	if p.stopped != nil {
		err = heldBack(topic, p.stopped)
	}
	for i := range p.retries {
		p.retries[i].fate = err
	}
	batches := slices.Concat(p.reports.held, p.retries)
	slices.SortFunc(batches, func(a, b batch) int { return cmp.Compare(a.order, b.order) })
	for _, b := range batches {
		p.fates = append(p.fates, fate{msgs: b.msgs, err: b.fate})
	}
	p.fates = append(p.fates, fate{msgs: p.buf, err: err})
	p.reports.held, p.reports.reported = nil, p.reports.next
	p.retries, p.buf, p.bytes = nil, nil, 0
}

// ended settles b's leaving p's batches out (acknowledged, failed or
// refused): p.out no longer counts it.
func (p *state) ended(b batch) {
	p.out--
	p.retryOut = p.retryOut && !b.retried
	if p.out == 0 {
		p.outConn = nil
	}
}

// afterSettle starts the salvage of p's first retry once nothing of p is
// out, when the broker refused it for what it is: its messages go one by
// one (salvage), each dead-lettered if Kafka refuses it. The partition
// stays busy meanwhile, so none of its later messages overtakes them. The
// broker wrote none of the sequences stamped after the refused batch
// (each needs its predecessor written), so its own sequence goes to the
// salvage's messages, and the later retries are stamped again after them
// (a new generation).
func (p *state) afterSettle() settled {
	st := settled{to: p.sender}
	if p.out > 0 || p.salvaging || len(p.retries) == 0 || p.retries[0].err.Transient {
		return st
	}
	b := p.retries[0]
	p.retries = slices.Delete(p.retries, 0, 1)
	p.seq.rewind(b)
	p.salvaging = true
	st.salvage, st.salvages = b, true
	return st
}

// queue adds the fates of batches, in order, to those p reports next.
func (p *state) queue(batches []batch) {
	for _, b := range batches {
		p.fates = append(p.fates, fate{msgs: b.msgs, err: b.fate})
	}
}
