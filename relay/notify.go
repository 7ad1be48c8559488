package relay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/sdnotify"
)

// A Notifier is told the relay's state in the words of systemd's
// sd_notify(3): newline-separated assignments such as READY=1, STATUS=…,
// STOPPING=1 and WATCHDOG=1. `outbox-cdc run` passes one for
// $NOTIFY_SOCKET when systemd started it; an embedding service passes its
// own, or none: the relay never reads $NOTIFY_SOCKET itself, which in an
// embedding process is the service's to use.
type Notifier interface {
	Notify(state string) error
}

// WithNotifier tells n, while Run runs, what the relay is doing:
//
//   - READY=1 once it streams its slot, or stands by because another
//     instance holds it: not before the slot is held or known to be
//     another's;
//   - STATUS= what it does (streaming, at which position and how many
//     events a second; Kafka failing since when; standing by;
//     backfilling a table, n of N rows; reconnecting; draining), when
//     that changes and at most every 5 s otherwise;
//   - STOPPING=1 when Run's context ends and the drain begins;
//   - EXTEND_TIMEOUT_USEC while it backfills before streaming, so that a
//     backfill of hours is not killed by the unit's start timeout;
//   - with watchdog positive (systemd's WATCHDOG_USEC), WATCHDOG=1 every
//     half of it, only while the loops that must make progress have come
//     round within it: the replication receive loop while a session
//     streams, the poll of the slot while standing by. A relay stuck for
//     the watchdog interval stops pinging, and systemd restarts it.
//
// Kafka unreachable is not a stall: the receive loop keeps coming round
// while the relay retries, and the status says so. Between sessions
// (reconnecting after a failure, its backoff) and while draining, no
// loop is watched.
//
// One goroutine does it all, started by Run and stopped before Run
// returns; the loops it watches pay one atomic store per round.
func WithNotifier(n Notifier, watchdog time.Duration) Option {
	return func(o *options) { o.notifier, o.watchdog = n, watchdog }
}

// tell starts the goroutine that keeps the notifier told while Run runs
// (ctx is Run's: its end is the drain), and returns the func that stops
// it and waits for it.
func (r *Relay) tell(ctx context.Context) (stop func()) {
	watchCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var watching sync.WaitGroup
	report := r.reporter(ctx)
	watching.Go(func() {
		sdnotify.Watch{Notifier: r.notifier, Watchdog: r.watchdog, Report: report, Wake: ctx.Done(), Logger: r.log}.Run(watchCtx)
	})
	return func() {
		cancel()
		watching.Wait()
	}
}

// beat records when a loop came round, at the cost of one atomic store:
// monotonic nanoseconds since base (set by New), so that a step of the
// wall clock is not mistaken for a stall.
type beat struct {
	base time.Time
	ns   atomic.Int64 // 0: never
}

func (b *beat) now() { b.ns.Store(max(int64(time.Since(b.base)), 1)) }

func (b *beat) last() (time.Time, bool) {
	ns := b.ns.Load()
	return b.base.Add(time.Duration(ns)), ns != 0
}

// backfillShown is the latest progress of a backfill, for the status.
type backfillShown struct {
	mu          sync.Mutex
	table       string
	total, done int64
}

func (b *backfillShown) set(table string, total, done int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.table, b.total, b.done = table, total, done
}

func (b *backfillShown) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.table == "" {
		return "preparing"
	}
	return fmt.Sprintf("table %s, %d of %d rows", b.table, b.done, b.total)
}

// backfillProgress is told each backfilled table's progress.
func (r *Relay) backfillProgress(table string, total, done int64) {
	r.metrics.Backfill(table, total, done)
	r.live.backfill.set(table, total, done)
}
