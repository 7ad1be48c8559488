package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// exactly is one session's exactly-once delivery. Its Kafka transactions
// hold whole Postgres transactions: the receive loop holds the gate from
// the first event of a Postgres transaction it hands over to that
// transaction's commit, and a Kafka commit takes the gate between two
// Postgres transactions. The commit waits for every event handed over to
// be acknowledged, writes the checkpoint record of the last Postgres
// transaction into the Kafka transaction, commits it (EndTxn) and begins
// the next; only then may the slot be confirmed past those events
// (Confirmed).
//
// The window of events in flight frees on each produce acknowledgement,
// as in at-least-once, so a Postgres transaction larger than the window
// streams through with memory bounded by the window and still commits as
// one Kafka transaction: its events stay invisible to read_committed
// consumers until the commit, which waits for the Postgres commit.
//
// Any failure (a publish refused, the producer fenced, a commit without a
// verdict) ends the session: its Kafka transaction is aborted (or left to
// the next Init, which aborts it), and the next session starts again from
// the slot, skipping what the last committed checkpoint says Kafka holds.
type exactly struct {
	track    Acked
	log      *slog.Logger
	interval time.Duration
	timeout  time.Duration // the transaction timeout, which bounds one commit

	// Set by openExactly, before reading begins.
	cluster *producer.Cluster
	txn     *producer.Txn
	ckpt    *producer.CheckpointWriter
	base    checkpoint.Record // the slot, system and instance every record names
	flush   func(on bool)     // the writer's Flush, set once it exists
	clean   RowCleaner        // with --cleanup (nil without): cleans a commit's rows; set once it exists
	// ended is told of each Kafka transaction that ended: committed, and
	// how long its commit held publishing back; or not (metrics).
	ended func(committed bool, took time.Duration)

	// gate (capacity 1) is held by the receive loop inside a Postgres
	// transaction it hands events of, and by a Kafka commit.
	gate chan struct{}

	// clock times the open Kafka transaction and the Postgres transaction
	// handed over last, to tell an abort by the coordinator's timeout.
	clock txnClock

	// Owned by the receive loop.
	held bool
	last boundary // the transaction of the last event handed over

	// closed is the last Postgres transaction whose events are all handed
	// over: written by the receive loop as it releases the gate, read by a
	// commit holding it.
	closed boundary
	// skip: Postgres transactions that committed before it are in Kafka
	// already (the checkpoint of the session's start). Set before reading.
	skip pglogrepl.LSN

	uncommitted atomic.Int64 // events handed over since the last Kafka commit
	// unsure is set when a commit failed after it began writing the
	// checkpoint record: that record's produce request, or EndTxn, may
	// still be on its way, so finish leaves the transaction to the next
	// InitProducerID rather than abort it with the same epoch. Written
	// under the gate; read by finish once the committer stopped.
	unsure    bool
	committed atomic.Uint64 // the slot may be confirmed up to here
	// cleaning is set from a commit until its rows are cleaned (clean):
	// the tracker, which saw their events acked, must not move the
	// position past them meanwhile (Confirmed).
	cleaning atomic.Bool
	// What settle cleans next, and the end it then confirms: set by a
	// commit, owned by whoever committed.
	toClean  cleanup.Committed
	cleanEnd pglogrepl.LSN
	settling bool
	// settled is closed when the settle under way ends; nil when none is
	// (or, after a commit whose next Begin failed, until the session ends).
	// While one runs, the next transaction gathers: enter holds a new
	// Postgres transaction back once heldLimit rows wait for its commit,
	// so that a backlog published faster than it is cleaned does not pile
	// up ids (a Postgres transaction larger than that still goes whole).
	settled   atomic.Pointer[chan struct{}]
	heldLimit int

	// The committer goroutine (run), owned by the session: stop ends it
	// between two commits, abort cuts a commit short.
	stop     chan struct{}
	stopOnce sync.Once
	abortCtx context.Context
	abort    context.CancelCauseFunc
	running  sync.WaitGroup
	// idle is set while the committer waits for an event to commit,
	// which Handing then tells it through wake (capacity 1).
	idle atomic.Bool
	wake chan struct{}
}

// boundary is a Postgres transaction, as its checkpoint names it.
type boundary struct {
	commit pglogrepl.LSN
	end    pglogrepl.LSN
	xid    uint32
	time   time.Time
}

// newExactly returns a session's exactly-once delivery, confirming start
// until a commit; openExactly readies its transaction.
func newExactly(track Acked, d Config, start pglogrepl.LSN, log *slog.Logger) *exactly {
	x := &exactly{track: track, interval: d.TransactionInterval, timeout: d.TransactionTimeout, log: log,
		gate: make(chan struct{}, 1), stop: make(chan struct{}), wake: make(chan struct{}, 1), clock: txnClock{now: time.Now}}
	x.committed.Store(uint64(start))
	x.abortCtx, x.abort = context.WithCancelCause(context.Background())
	return x
}

// skips reports whether an event is in Kafka already: one of a
// transaction whose commit record starts at commit, or (standalone) a
// non-transactional message reported at commit, the end of its record.
// Postgres skips by the start of a record: a checkpoint ending at E holds a
// transaction whose commit starts before E, or a message whose record
// ends at E, while the next transaction's commit may start at E.
func (x *exactly) Skips(commit pglogrepl.LSN, standalone bool) bool {
	if standalone {
		return commit <= x.skip
	}
	return commit < x.skip
}

// enter takes the gate for the Postgres transaction being handed over,
// unless the receive loop holds it already.
func (x *exactly) Enter(ctx context.Context) error {
	if x.held {
		return nil
	}
	if done := x.settled.Load(); done != nil && x.clean.Held() >= x.heldLimit {
		select {
		case <-*done:
		case <-ctx.Done():
			return fmt.Errorf("wait for the rows of the last kafka commit to be cleaned: %w", context.Cause(ctx))
		}
	}
	select {
	case x.gate <- struct{}{}:
		x.held = true
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the kafka commit: %w", context.Cause(ctx))
	}
}

// handing counts an event of the held transaction before it is reserved,
// so that Confirmed holds the slot back from the moment it may be sent.
func (x *exactly) Handing(ev *decode.Event) {
	if x.uncommitted.Add(1) == 1 && x.idle.Load() {
		select { // the committer waits for work: a commit is due at once or at the next tick
		case x.wake <- struct{}{}:
		default:
		}
	}
	x.last = boundary{commit: ev.CommitLSN, xid: ev.Xid, time: ev.CommitTime}
	x.clock.hand(ev.Xid, ev.CommitLSN, ev.Size())
}

// leave releases the gate at the commit (end) of the Postgres transaction
// whose events the receive loop handed over.
func (x *exactly) Leave(end pglogrepl.LSN) {
	if !x.held {
		return
	}
	b := x.last
	b.end = end // a non-transactional message's: its own LSN, the end of its record
	x.closed, x.held = b, false
	<-x.gate
}

// Confirmed is the replication stream's position to confirm: the end of
// the last Postgres transaction a Kafka commit holds or, while no event
// waits for a commit, the tracker's (which moves past transactions without
// events, and to an idle server's WAL end). Called on the receive loop,
// which alone adds to uncommitted.
func (x *exactly) Confirmed() pglogrepl.LSN {
	c := pglogrepl.LSN(x.committed.Load())
	if x.uncommitted.Load() == 0 && !x.held && !x.cleaning.Load() {
		if t := x.track.Confirmed(); t > c {
			x.raise(t)
			c = t
		}
	}
	return c
}

// ConfirmIdle lets the tracker confirm an idle server's WAL end.
func (x *exactly) ConfirmIdle(serverWALEnd pglogrepl.LSN) pglogrepl.LSN {
	x.track.ConfirmIdle(serverWALEnd)
	return x.Confirmed()
}

// raise moves committed forward to lsn.
func (x *exactly) raise(lsn pglogrepl.LSN) {
	for {
		old := x.committed.Load()
		if uint64(lsn) <= old || x.committed.CompareAndSwap(old, uint64(lsn)) {
			return
		}
	}
}

// commit commits the open Kafka transaction with the checkpoint of the
// last Postgres transaction handed over, and begins the next. The caller
// holds the gate. It ends early only through abort (a publish failed, so
// some event will never be acknowledged) or the transaction timeout.
func (x *exactly) commit() error {
	n := x.uncommitted.Load()
	if n == 0 {
		return nil
	}
	if x.settling {
		return errors.New("exactly-once: the rows of the last kafka commit are not cleaned yet")
	}
	began := time.Now()
	b := x.closed
	ctx, cancel := context.WithTimeout(x.abortCtx, x.timeout)
	defer cancel()
	if x.flush != nil {
		x.flush(true)
		defer x.flush(false)
	}
	// The checkpoint is written once the batches are acknowledged, not
	// beside them: a broker verifying a transaction's partitions (KIP-890,
	// Kafka 3.6 and later) answers NETWORK_EXCEPTION to the older of two
	// produce requests of one transactional id it verifies at once, and
	// that one is retried after a pause: written concurrently, the exactly-once
	// p99 went from 36 to 201 ms at 1,000 tx/s (docs/benchmarks.md).
	if err := x.track.WaitAcked(ctx); err != nil {
		return err
	}
	rec := x.base
	rec.CommitLSN, rec.EndLSN, rec.Xid, rec.CommitTime = b.commit, b.end, b.xid, b.time
	x.unsure = true
	if err := x.ckpt.Write(ctx, rec); err != nil {
		return err
	}
	if err := x.txn.Commit(ctx); err != nil {
		return fmt.Errorf("commit the kafka transaction through %s: %w", b.end, err)
	}
	x.unsure = false
	x.clock.committed()
	if x.clean != nil {
		// Every event handed over is acknowledged, and none more comes
		// before the gate opens: what the cleaner holds is this commit's.
		x.cleaning.Store(true)
		x.toClean, x.cleanEnd, x.settling = x.clean.Commit(), b.end, true
		done := make(chan struct{})
		x.settled.Store(&done)
	} else {
		x.raise(b.end)
	}
	x.uncommitted.Add(-n)
	if x.ended != nil {
		x.ended(true, time.Since(began))
	}
	x.log.Debug("kafka transaction committed", slog.Int64("events", n), slog.String("through", b.end.String()))
	if err := x.txn.Begin(); err != nil {
		return fmt.Errorf("begin a kafka transaction: %w", err)
	}
	return nil
}

// settle cleans the rows (--cleanup) of the Kafka transaction that commit
// committed, and only then lets the slot move past it. It runs after the
// gate opened, so that publishing goes on meanwhile; the next commit waits
// for it. A failure ends the session, and the next one cleans those rows
// (see cleanup.Hold). Called by whoever committed: the committer, or
// finish once it stopped.
func (x *exactly) settle() error {
	if !x.settling {
		return nil
	}
	if done := x.settled.Load(); done != nil {
		defer func() { // after the raise; a failure leaves settling set
			x.settled.Store(nil)
			close(*done)
		}()
	}
	if err := x.clean.Release(x.abortCtx, x.toClean); err != nil {
		return err // still settling: no later commit confirms past these rows
	}
	x.settling, x.toClean = false, cleanup.Committed{}
	x.raise(x.cleanEnd)
	x.cleaning.Store(false)
	return nil
}

// start runs the committer; failed receives its error.
func (x *exactly) Start(ctx context.Context, failed func(error)) {
	x.running.Go(func() {
		if err := x.run(ctx); err != nil {
			x.clock.fail()
			failed(err)
		}
	})
}

// halt stops the committer, letting a commit under way finish, and
// returns once it has.
func (x *exactly) halt() {
	x.stopOnce.Do(func() { close(x.stop) })
	x.running.Wait()
}
