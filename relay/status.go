package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/sdnotify"
)

// reporter returns what the relay tells the service manager, asked by
// sdnotify.Watch every sdnotify.Look on its one goroutine; ctx is Run's.
func (r *Relay) reporter(ctx context.Context) func(now time.Time) sdnotify.Report {
	var rate eventRate
	ready := false
	return func(now time.Time) sdnotify.Report {
		rep := r.report(ctx, now, &rate)
		ready = ready || rep.Ready
		if !ready && rep.Phase == phaseReconnecting {
			rep.Phase = phaseStarting // never streamed yet: still starting
		}
		return rep
	}
}

const (
	phaseStarting     = "starting"
	phaseReconnecting = "reconnecting"
)

// report is the relay's state now. Its loops are the ones that must
// make progress in that state, read from what they record as they come
// round: the stream's receive loop (replication.Stream.Alive), and the
// standby's poll of the slot (live.polled), which sleeps up to
// standbyPoll between rounds.
func (r *Relay) report(ctx context.Context, now time.Time, rate *eventRate) sdnotify.Report {
	l, slot := &r.live, r.target.Slot
	var rep sdnotify.Report
	if s := l.stream.Load(); s != nil {
		if at, ok := s.Alive(); ok {
			rep.Loops = append(rep.Loops, sdnotify.Loop{Name: "the replication receive loop", At: at})
		}
	}
	standingBy := l.standingBy.Load()
	if at, ok := l.polled.last(); ok && standingBy && !l.preparing.Load() && !l.backfilling.Load() {
		rep.Loops = append(rep.Loops, sdnotify.Loop{Name: "the standby's poll of the slot", At: at, Sleep: standbyPoll})
	}
	perSecond := rate.sample(now, r.metrics.Published())
	switch streaming := l.streaming.Load(); {
	case ctx.Err() != nil:
		events, _ := l.inFlight()
		rep.Stopping, rep.Phase = true, "draining"
		rep.Detail = fmt.Sprintf("%d events in flight, waiting up to %s for their acknowledgements", events, r.cfg.Stream.DrainTimeout)
	case l.backfilling.Load():
		rep.Phase, rep.Detail, rep.Extend = "backfilling", l.backfill.String(), true
	case streaming:
		rep.Ready, rep.Phase = true, "streaming"
		rep.Detail = fmt.Sprintf("slot %s, received %s, confirmed %s, %d events/s", slot, l.received(), l.confirmed(), perSecond)
		if failing := r.kafkaFailing(); failing != "" {
			rep.Phase, rep.Detail = "streaming, Kafka failing", rep.Detail+"; "+failing
		}
	case standingBy:
		rep.Ready, rep.Phase = true, "standing by"
		rep.Detail = fmt.Sprintf("slot %s is held by another instance; taking over when it lets go", slot)
	default:
		rep.Phase, rep.Detail = phaseReconnecting, "slot "+slot
	}
	return rep
}

// kafkaFailing says since when Kafka's requests have failed, when they
// have for a few seconds ("" otherwise): the session's writer's, or
// exactly-once's across sessions.
func (r *Relay) kafkaFailing() string {
	since, request, last, failing := r.outage.Failing(5 * time.Second)
	if w := r.live.writer.Load(); w != nil && !failing {
		since, request, last, failing = w.Failing(5 * time.Second)
	}
	if !failing {
		return ""
	}
	return fmt.Sprintf("Kafka unreachable since %s (%s: %s), retrying", since.Format("15:04:05 MST"), request, last)
}

// eventRate is the events published a second, over windows of
// sdnotify.Refresh.
type eventRate struct {
	at        time.Time
	published uint64
	perSecond uint64
}

func (e *eventRate) sample(now time.Time, published uint64) uint64 {
	if e.at.IsZero() {
		e.at, e.published = now, published
	}
	if d := now.Sub(e.at); d >= sdnotify.Refresh {
		e.perSecond = uint64(float64(published-e.published) / d.Seconds())
		e.at, e.published = now, published
	}
	return e.perSecond
}
