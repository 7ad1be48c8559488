package checkpoint

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pglogrepl"
)

// Seq numbers events in the order they were read from the WAL.
type Seq uint64

// Tracker records events in flight and the transactions they belong to.
// All methods are safe for concurrent use: the replication loop calls
// Reserve, Begin, Commit and ConfirmIdle; the sink's completion calls Ack.
type Tracker struct {
	maxEvents int
	maxBytes  int64

	mu         sync.Mutex
	next       Seq     // seq the next Reserve returns
	acked      Seq     // every seq below it is acked
	done       []bool  // ack flags of seqs in [acked, next), indexed by seq % maxEvents
	size       []int64 // bytes reserved by those seqs
	bytes      int64   // sum of size over unacked seqs
	open       bool    // between Begin and Commit
	pending    []txn   // committed transactions not yet confirmed, oldest first
	pendingBuf []txn   // pending's backing array, from its start
	confirmed  pglogrepl.LSN

	room chan struct{} // signalled when an Ack frees room
	// idle is closed once every reserved event is acked, for WaitAcked;
	// nil while no one waits. Guarded by mu.
	idle chan struct{}
}

// txn is a committed transaction waiting for its events' acks: once every seq
// below endSeq is acked, its end LSN can be confirmed.
type txn struct {
	endSeq Seq
	end    pglogrepl.LSN
}

// New returns a tracker that confirms start until something newer is acked,
// and lets at most maxEvents events and maxBytes bytes be in flight. A single
// event larger than maxBytes is still let through when nothing else is in
// flight, so that it cannot block the stream forever.
func New(start pglogrepl.LSN, maxEvents int, maxBytes int64) *Tracker {
	if maxEvents < 1 {
		maxEvents = 1
	}
	return &Tracker{
		maxEvents: maxEvents,
		maxBytes:  maxBytes,
		done:      make([]bool, maxEvents),
		size:      make([]int64, maxEvents),
		confirmed: start,
		room:      make(chan struct{}, 1),
	}
}

// Begin marks the start of a transaction. Until its Commit, ConfirmIdle
// confirms nothing: the server may already report a WAL end past the commit
// of the transaction being received.
func (t *Tracker) Begin() {
	t.mu.Lock()
	t.open = true
	t.mu.Unlock()
}

// Reserve admits one event of n bytes, blocking while the window is full,
// and returns its sequence number for Ack.
func (t *Tracker) Reserve(ctx context.Context, n int64) (Seq, error) {
	for {
		t.mu.Lock()
		inFlight := int(t.next - t.acked)
		if inFlight < t.maxEvents && (inFlight == 0 || t.bytes+n <= t.maxBytes) {
			seq := t.next
			t.next++
			t.done[int(seq%Seq(t.maxEvents))] = false
			t.size[int(seq%Seq(t.maxEvents))] = n
			t.bytes += n
			t.mu.Unlock()
			return seq, nil
		}
		t.mu.Unlock()
		select {
		case <-t.room:
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for room in the in-flight window: %w", context.Cause(ctx))
		}
	}
}

// Commit closes the transaction begun last: its end LSN is confirmed once
// every event reserved so far is acked.
func (t *Tracker) Commit(end pglogrepl.LSN) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open = false
	if n := len(t.pending); n > 0 && t.pending[n-1].endSeq == t.next {
		// Nothing was reserved since the previous commit: both confirm at
		// the same moment, so keep one entry and the queue stays bounded.
		t.pending[n-1].end = end
	} else {
		if len(t.pending) == cap(t.pending) {
			// Grow into a new backing array that advance may compact into.
			grown := make([]txn, len(t.pending), max(16, 2*len(t.pending)))
			copy(grown, t.pending)
			t.pendingBuf, t.pending = grown, grown
		}
		t.pending = append(t.pending, txn{endSeq: t.next, end: end})
	}
	t.advance()
}

// Ack records that the broker acknowledged event seq. Acks may come in any
// order; acking a seq twice or one never reserved is ignored.
func (t *Tracker) Ack(seq Seq) {
	t.mu.Lock()
	if seq < t.acked || seq >= t.next {
		t.mu.Unlock()
		return
	}
	i := int(seq % Seq(t.maxEvents))
	if t.done[i] {
		t.mu.Unlock()
		return
	}
	t.done[i] = true
	for t.acked < t.next && t.done[int(t.acked%Seq(t.maxEvents))] {
		j := int(t.acked % Seq(t.maxEvents))
		t.bytes -= t.size[j]
		t.size[j] = 0
		t.acked++
	}
	t.advance()
	if t.idle != nil && t.acked == t.next {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
	select {
	case t.room <- struct{}{}:
	default:
	}
}

// advance confirms every pending transaction whose events are all acked.
// Called with mu held. Confirmed entries are dropped from the front by
// reslicing, in O(1); the backing array is compacted only once its unused
// front outgrows what is left, so each entry is copied O(1) times overall.
func (t *Tracker) advance() {
	i := 0
	for ; i < len(t.pending) && t.pending[i].endSeq <= t.acked; i++ {
		if t.pending[i].end > t.confirmed {
			t.confirmed = t.pending[i].end
		}
	}
	if i == 0 {
		return
	}
	t.pending = t.pending[i:]
	if len(t.pending) == 0 {
		t.pending = t.pendingBuf[:0]
	} else if front := cap(t.pendingBuf) - cap(t.pending); front > len(t.pending) {
		t.pending = append(t.pendingBuf[:0], t.pending...)
	}
}

// Confirmed returns the newest LSN that is safe to report as flushed.
func (t *Tracker) Confirmed() pglogrepl.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed
}

// ConfirmIdle confirms serverWALEnd, the WAL end of a keepalive received
// after everything before it was tracked, when no transaction is open and no
// event is unacknowledged: then nothing the server sent before it is owed to
// Kafka, and confirming it keeps an idle outbox from pinning WAL. It returns
// the confirmed position either way.
func (t *Tracker) ConfirmIdle(serverWALEnd pglogrepl.LSN) pglogrepl.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open && t.acked == t.next && len(t.pending) == 0 && serverWALEnd > t.confirmed {
		t.confirmed = serverWALEnd
	}
	return t.confirmed
}

// InFlight returns the number of events and bytes not yet acknowledged.
func (t *Tracker) InFlight() (events int, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.next - t.acked), t.bytes
}

// WaitAcked waits until every event reserved so far is acknowledged, or
// ctx ends. Exactly-once calls it before a Kafka commit, while nothing new
// is reserved.
func (t *Tracker) WaitAcked(ctx context.Context) error {
	t.mu.Lock()
	if t.acked == t.next {
		t.mu.Unlock()
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the acknowledgements of the events in flight: %w", context.Cause(ctx))
	}
}
