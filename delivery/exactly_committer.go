package delivery

import (
	"context"
	"time"
)

// run commits while events wait for a commit, until stop is called or a
// commit fails (returned); ctx ends waiting for the gate. While events keep
// coming, commits start at the ticks of a ticker, one interval apart: what
// ends meanwhile gathers into the next (a commit that waited for a
// Postgres transaction's end may be followed sooner; one that outlasted the
// interval restarts the ticker). A Postgres transaction whose first event
// comes while nothing waits for a commit, an interval or more after the
// last commit ended, commits as soon as it ends rather than at a tick
// (and the ticker starts again from there): an outbox written now and
// then pays the commit's round trips, not half an interval besides. An idle committer does not wake
// until an event waits for a commit (Handing); then it waits for the gate
// as at any commit, so a Postgres transaction that outlasts the interval
// has the writer send at once (takeGate).
func (x *exactly) run(ctx context.Context) error {
	tick := time.NewTicker(x.interval)
	defer tick.Stop()
	var ended time.Time // when the last commit ended
	for {
		if x.uncommitted.Load() == 0 {
			// idle before the second look: a Handing after it wakes us,
			// one before it is counted. A wake left over from an earlier
			// idle spell costs one more look.
			x.idle.Store(true)
			if x.uncommitted.Load() == 0 {
				select {
				case <-x.stop:
					return nil
				case <-ctx.Done():
					return nil
				case <-x.wake:
				}
			}
			x.idle.Store(false)
			if x.uncommitted.Load() == 0 {
				continue
			}
		}
		if time.Since(ended) >= x.interval { // quiet: commit now, tick an interval after it
			tick.Reset(x.interval)
		} else {
			// Under steady load commits keep the ticker's beat, which
			// delays in taking the gate do not stretch.
			select {
			case <-x.stop:
				return nil
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		if !x.takeGate(ctx) {
			return nil
		}
		began := time.Now()
		err := x.commit()
		<-x.gate
		if err == nil {
			err = x.settle()
		}
		if err != nil {
			return err
		}
		ended = time.Now()
		if ended.Sub(began) >= x.interval {
			// A commit that outlasted the interval (a slow broker, a
			// transaction it waited for) missed its tick: the next gathers
			// an interval, rather than start at once with what came
			// meanwhile, or at the next transaction's first event.
			tick.Reset(x.interval)
		}
	}
}

// takeGate takes the commit gate, false when stop or ctx ends first. A
// gate held when a commit is due is a Postgres transaction spanning it: nothing can
// commit before its end, so holding requests back for the commit (the
// writer's pacing, see pacing) gains nothing, and would stream a
// transaction larger than the in-flight window one window per interval,
// perhaps past the transaction timeout. Requests then leave at once until
// the commit (whose Flush(false) ends it).
func (x *exactly) takeGate(ctx context.Context) bool {
	select {
	case x.gate <- struct{}{}:
		return true
	default:
	}
	if x.flush != nil {
		x.flush(true)
	}
	select {
	case x.gate <- struct{}{}:
		return true
	case <-x.stop:
	case <-ctx.Done():
	}
	if x.flush != nil {
		x.flush(false)
	}
	return false
}
