package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/delivery"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// backfilled reports whether some table has a backfill (Backfill.Where).
func (r *Relay) backfilled() bool {
	for _, t := range r.cfg.Tables {
		if t.Backfill.Where != "" {
			return true
		}
	}
	return false
}

// backfillCommitInterval is the least time between two commits of an
// exactly-once backfill. Reading pauses while a commit waits for its rows'
// acknowledgements and writes its checkpoint, and backfilled rows gain
// nothing from being readable 25 ms sooner: 100,000 rows took 1.75 s
// committing every 25 ms, 1.17 s every 100 ms, 1.20 s every 250 ms, and
// 1.11 s in at-least-once (medians of 3 rounds, before this floor: see
// docs/benchmarks.md, "The backfill in exactly-once").
const backfillCommitInterval = 100 * time.Millisecond

// prepareBackfilled is prepare for a relay with a backfill: package
// backfill decides what is due (creating the slot, exporting its snapshot,
// when there is none) and publishes it through a backfillEntry; then it
// returns where streaming starts. force is --backfill-force, at start.
func (r *Relay) prepareBackfilled(ctx context.Context, force bool) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	if err := slot.PrepareTables(ctx, conn, r.target); err != nil {
		return 0, err
	}
	specs := make([]backfill.Spec, len(r.cfg.Tables))
	for i, t := range r.cfg.Tables {
		specs[i] = t.Backfill
		specs[i].RowFilter = t.Where
	}
	// A forced backfill publishes again what the slot streams: at least
	// once, whatever the mode (which warned).
	entry := newBackfillEntry(r, r.delivery.Backfill(force, false))
	cfg := backfill.Config{
		URL: r.cfg.PostgresURL, Target: r.target, Specs: specs, Force: force,
		ConfirmInterval: r.cfg.Stream.ConfirmInterval, DrainTimeout: r.cfg.Stream.DrainTimeout,
		Logger: r.log, Progress: r.backfillProgress, CommitInterval: max(r.cfg.Delivery.TransactionInterval, backfillCommitInterval),
		CleanGap: r.cfg.Cleanup != cleanup.None, Committed: entry.bt.Committed(),
	}
	// Backfilling from here: Prepare may wait for another instance's
	// backfill (its lock) as long as that runs, and the service manager's
	// start-up timeout is extended meanwhile (sdnotify's EXTEND).
	r.live.backfilling.Store(true)
	defer r.live.backfilling.Store(false)
	plan, err := backfill.Prepare(ctx, conn, cfg)
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	if plan.Due() {
		if err := plan.Run(ctx, entry.entry()); err != nil || ctx.Err() != nil {
			return 0, err
		}
	}
	return slot.Prepare(ctx, conn, r.target, false)
}

// reprepare readies the slot for the session after one that ended (or
// that found the slot busy). With --backfill-where, a backfill of the slot
// left unfinished (another instance runs it, or one was cut short) is
// waited for, or resumed, first (prepareBackfilled): no session may stream
// the slot before its backfill is done, or an aggregate's older rows would
// follow its newer ones, and in exactly-once its InitProducerID would
// fence the backfill's producer.
//
// With --on-slot-lost heal, a slot found lost is healed first
// (prepareHealing).
func (r *Relay) reprepare(ctx context.Context, standby bool) (pglogrepl.LSN, error) {
	if r.heals() {
		return r.prepareHealing(ctx, true, func(ctx context.Context) (pglogrepl.LSN, error) { return r.reprepareSlot(ctx, standby) })
	}
	return r.reprepareSlot(ctx, standby)
}

// reprepareSlot is reprepare without a heal.
func (r *Relay) reprepareSlot(ctx context.Context, standby bool) (pglogrepl.LSN, error) {
	start, err := r.prepare(ctx, false, standby)
	if err != nil || !r.backfilled() {
		return start, err
	}
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	states, err := backfill.ReadStates(ctx, conn, r.target.Tables[0].Schema, r.target.Slot)
	conn.Close(context.Background())
	if err != nil {
		return 0, fmt.Errorf("read the backfills of slot %q: %w", r.target.Slot, err)
	}
	for _, t := range r.cfg.Tables {
		st, ok := states[t.Qualified()]
		if ok && t.Backfill.Where != "" && st.Phase != backfill.PhaseDone && st.Phase != backfill.PhaseForced {
			r.live.standingBy.Store(false) // backfilling, or waiting for the lock to
			r.log.Info("the slot's backfill is unfinished: waiting for it, or resuming it, before streaming",
				slog.String("table", st.Table), slog.String("phase", st.Phase))
			return r.prepareBackfilled(ctx, false) // --backfill-force forces at start only
		}
	}
	return start, nil
}

// backfillEntry is the pipeline's entry for backfilled rows
// (backfill.Entry): a publisher with an in-flight window of its own
// (Stream.MaxInFlight and MaxInFlightBytes, nothing committed on it, so it
// confirms no position), opened by the first row after a drain.
type backfillEntry struct {
	r  *Relay
	bt delivery.Backfill // the delivery mode's: how the rows are written, and committed

	// Of the rows handed over since the last drain; pub is nil before.
	pub      *publisher
	out      outlet
	acks     *backfillAcks
	failure  context.Context // ends at the first publish failure, its cause
	fail     context.CancelCauseFunc
	stop     context.CancelFunc // ends the watch on pub.failed
	watching sync.WaitGroup
	returned bool // Publish returned the failure
}

func newBackfillEntry(r *Relay, bt delivery.Backfill) *backfillEntry {
	e := &backfillEntry{r: r, bt: bt}
	e.failure, e.fail = context.WithCancelCause(context.Background())
	return e
}

// Failure ends at the first publish failure since the last drain; see
// backfill.Entry.
func (e *backfillEntry) Failure() context.Context { return e.failure }

// Publish hands row over; see backfill.Entry.
func (e *backfillEntry) Publish(ctx context.Context, row backfill.Row, done func()) error {
	if e.pub == nil {
		if err := e.open(ctx); err != nil {
			return err
		}
	}
	if err := e.failed(); err != nil {
		return err
	}
	// A publish failure ends the wait at once, even for room in the
	// window: the window never frees past a failed event.
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.failure, func() { cancel(context.Cause(e.failure)) })()
	pe := &pendingEvent{ev: row.Event, invalid: row.Invalid}
	err := e.out.reserve(hctx, pe)
	if err == nil {
		e.acks.expect(pe.seq, done)
		e.bt.Handed()
		if err = e.out.send(hctx, pe); err != nil {
			e.bt.Cut()
		}
	}
	if err != nil && ctx.Err() == nil {
		if ferr := e.failed(); ferr != nil {
			return ferr // the publish failure, not the interrupted wait it caused
		}
	}
	return err
}

// Drain closes the publisher (its writer flushes and waits for every
// completion, its cleaner cleans what is left), bounded by ctx; see
// backfill.Entry.
func (e *backfillEntry) Drain(ctx context.Context) error {
	if e.pub == nil {
		return nil
	}
	err := e.pub.close(ctx)
	err = errors.Join(err, e.bt.End(err == nil))
	e.stop()
	e.watching.Wait()
	select {
	case ferr := <-e.pub.failed: // reported as the watch ended
		e.fail(ferr)
	default:
	}
	if ferr := context.Cause(e.failure); e.failure.Err() != nil && !e.returned {
		err = errors.Join(ferr, err)
	}
	e.pub = nil
	e.failure, e.fail = context.WithCancelCause(context.Background())
	return err
}

// open starts a publisher and its window, and watches for its first
// failure.
func (e *backfillEntry) open(ctx context.Context) error {
	st := e.r.cfg.Stream
	track := checkpoint.New(0, st.MaxInFlight, st.MaxInFlightBytes)
	acks := &backfillAcks{track: track, done: map[checkpoint.Seq]func(){}}
	var pub *publisher
	if err := e.bt.Open(ctx, func(w delivery.Writes) (delivery.Publisher, error) {
		var err error
		if pub, err = e.r.newPublisher(ctx, acks, nil, w); err != nil {
			return delivery.Publisher{}, err
		}
		return pub.delivered(), nil
	}); err != nil {
		return err
	}
	e.pub, e.acks, e.out, e.returned = pub, acks, outlet{track: track, pub: pub.writer, clean: pub.cleaner}, false
	watch, stop := context.WithCancel(context.Background())
	e.stop = stop
	e.watching.Go(func() {
		select {
		case err := <-pub.failed:
			e.fail(err)
		case <-watch.Done():
		}
	})
	return nil
}

// failed returns the first publish failure, if one came.
func (e *backfillEntry) failed() error {
	if e.failure.Err() == nil {
		return nil
	}
	e.returned = true
	return context.Cause(e.failure)
}

// backfillAcks takes the publisher's acknowledgements: each frees room in
// the window and tells its row's done.
type backfillAcks struct {
	track *checkpoint.Tracker
	mu    sync.Mutex
	done  map[checkpoint.Seq]func() // of events handed over, not yet acknowledged
}

// expect keeps done until seq is acknowledged.
func (a *backfillAcks) expect(seq checkpoint.Seq, done func()) {
	a.mu.Lock()
	a.done[seq] = done
	a.mu.Unlock()
}

// Ack tells seq's done, then frees its room.
func (a *backfillAcks) Ack(seq checkpoint.Seq) {
	a.mu.Lock()
	done, ok := a.done[seq]
	delete(a.done, seq)
	a.mu.Unlock()
	if ok {
		done()
	}
	a.track.Ack(seq)
}
