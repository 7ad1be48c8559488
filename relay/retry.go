package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
	"github.com/outbox-cdc/outbox-cdc/internal/retry"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// A failed session is followed by another after a jittered wait that
// doubles from sessionBackoff up to sessionBackoffCeiling.
const sessionBackoff, sessionBackoffCeiling = time.Second, 30 * time.Second

// maxUnclassified is how many failures in a row, with errors nobody
// classified and no session streaming in between, the relay rides out
// before it gives up: retrying an error nobody understands for ever would
// hide it.
const maxUnclassified = 10

// reconnect runs sessions from start until ctx ends (nil) or a failure
// retrying cannot mend. Each failure is asked whether it can be retried
// (retry.Classify): a transient one (Postgres restarting, a connection cut,
// a broker away) is retried with backoff for as long as it lasts; a
// permanent one is returned; one nobody classified is retried too, but
// logged as an error with its type, and returned once maxUnclassified of
// them come in a row without a session that began streaming. prepared is
// the first session's preparation failure (a slot in use, at start) or
// nil.
func (r *Relay) reconnect(ctx context.Context, start pglogrepl.LSN, prepared error) error {
	var (
		standby      bool         // another process streams the slot; we wait for it to let go
		fenced       bool         // standing by since a fence, logged once
		unclassified retry.Streak // failures in a row that nobody classified
		err          = prepared   // prepare's failure, which stands for the session it prevents
	)
	for attempt := 0; ; attempt++ {
		began := false
		if err == nil {
			began, err = r.session(ctx, start)
		}
		if ctx.Err() != nil {
			return nil
		}
		if began {
			attempt, standby, fenced = 0, false, false
		}
		stop, timedOut := r.delivery.Judge(err)
		if stop != nil {
			return stop
		}
		if errors.Is(err, producer.ErrFenced) {
			r.logFenced(ctx, err, fenced || timedOut)
			err, standby, fenced = replication.ErrSlotActive, true, true
		}
		class := retry.Classify(err)
		if class == retry.Permanent {
			return err
		}
		failures := unclassified.Add(class, began)
		if failures >= maxUnclassified {
			return fmt.Errorf("giving up after %d failures in a row not known to be retriable (the last a %T): %w",
				failures, retry.Innermost(err), err)
		}
		var wait time.Duration
		if errors.Is(err, replication.ErrSlotActive) {
			attempt = 0
			wait = r.standbyWait(err, standby)
			standby = true
		} else {
			standby, fenced = false, false
			wait = r.retryWait(attempt, err, class, failures, timedOut)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		r.live.preparing.Store(true)
		start, err = r.reprepare(ctx, standby) // a failure is judged above, as the session's
		r.live.preparing.Store(false)
	}
}

// logFenced says that exactly-once's producer was fenced: an instance that
// took the slot took the transactional id too. This one's producer is
// dead; it waits for the slot like any second instance, in one line, not
// two, and none more while it stands by (quiet: at debug level).
func (r *Relay) logFenced(ctx context.Context, err error, quiet bool) {
	level := slog.LevelWarn
	if quiet {
		level = slog.LevelDebug
	}
	r.log.Log(ctx, level, "fenced, standing by: another instance took the slot and the transactional id, or a Kafka transaction stayed open past "+
		"--transaction-timeout (a Postgres transaction that takes longer to stream, or --cleanup's statements for the last one: raise it); this producer writes nothing more, "+
		"and the relay takes the slot over when it is free",
		slog.String("slot", r.target.Slot), slog.Any("err", err))
}

// standbyWait is the wait before a standby's next try at the slot that
// another process streams. A second instance is quiet (it says so once,
// unless already standing by) and quick to take over: it polls about every
// standbyPoll, not on the failures' backoff.
func (r *Relay) standbyWait(err error, already bool) time.Duration {
	wait := standbyPoll/2 + rand.N(standbyPoll/2+1)
	r.live.polled.now() // a round of the standby's poll, watched by the notifier's watchdog
	r.live.standingBy.Store(true)
	if !already {
		r.log.Info("standing by: the slot is streamed by another process; taking over when it lets go",
			slog.String("slot", r.target.Slot), slog.Any("err", err))
	}
	return wait
}

// retryWait is the backoff before the session that follows a failed one,
// the attempt-th in a row. An error nobody classified is logged as an
// error with its type, so that it is noticed before maxUnclassified of
// them stop the relay; a transaction timeout was already said by
// the delivery mode (delivery.Mode.Judge).
func (r *Relay) retryWait(attempt int, err error, class retry.Class, failures int, timedOut bool) time.Duration {
	r.live.standingBy.Store(false)
	r.metrics.Reconnected()
	wait := backoff.Delay(attempt, sessionBackoff, sessionBackoffCeiling)
	if class == retry.Unclassified {
		r.log.Error("stream interrupted by an error not known to be retriable; reconnecting, and giving up if it persists",
			slog.Any("err", err), slog.String("type", fmt.Sprintf("%T", retry.Innermost(err))),
			slog.Int("failures", failures), slog.Int("limit", maxUnclassified), slog.Duration("in", wait))
	} else if !timedOut {
		r.log.Warn("stream interrupted, reconnecting", slog.Any("err", err), slog.Duration("in", wait))
	}
	return wait
}
