package relay

import (
	"context"
	"sync/atomic"
	"time"
)

// stallGuard notices that the process stalled (frozen by SIGSTOP, paused
// by a hypervisor, starved of CPU) and holds produce requests for a moment
// afterwards, so that the replication stream reads first whether its
// connection outlived the stall. One that did not (its walsender was
// terminated, and another instance may be streaming the slot by now) ends
// the session, which abandons the writer: nothing it had queued goes out,
// and nothing is retried, since the new owner publishes it all again.
//
// Both the guard's own ticker and the writer's senders look at the clock,
// so whichever wakes first after a stall sees the gap: a sender cannot
// slip a request out before the guard has noticed.
type stallGuard struct {
	base  time.Time
	last  atomic.Int64 // when the clock was last looked at, since base
	until atomic.Int64 // no request before this, since base
}

const (
	stallGap  = time.Second            // a gap between looks this long is a stall
	stallHold = 500 * time.Millisecond // how long requests wait after one
	stallTick = 100 * time.Millisecond // how often the guard looks
)

func newStallGuard() *stallGuard { return &stallGuard{base: time.Now()} }

// look notes the time, and a stall if the last look was long ago.
func (g *stallGuard) look() time.Duration {
	now := time.Since(g.base)
	if prev := time.Duration(g.last.Swap(int64(now))); now-prev > stallGap {
		g.until.Store(int64(now + stallHold))
	}
	return now
}

// run looks at the clock every stallTick until ctx ends.
func (g *stallGuard) run(ctx context.Context) {
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	for {
		g.look()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// hold returns once no stall is fresh, or when ctx ends.
func (g *stallGuard) hold(ctx context.Context) {
	for {
		now := g.look()
		wait := time.Duration(g.until.Load()) - now
		if wait <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
