package replication

import (
	"sync/atomic"
	"time"
)

// Alive returns when Run last came round its receive loop, and false when
// Run is not running. It is safe to call from any goroutine.
//
// The loop comes round on every message received, at every status
// deadline even when the server is silent (the read deadline ends each
// wait: at most StatusInterval, ConfirmEvery or ReceiveTimeout/2 apart,
// 20 ms by default), and each time a handler blocked on a full in-flight
// window is interrupted by that deadline (a broker away is waited for
// without the loop stopping). So a loop that has not come round for
// seconds is stuck: in a write to the server (a standby status update to
// a peer that stopped reading blocks until ReceiveTimeout ends the
// session), or in a handler that does not
// return when its context ends. A watchdog reads this to decide whether
// to tell the service manager that the process is alive.
func (s *Stream) Alive() (time.Time, bool) { return s.alive.last() }

// beat records when a loop came round, at the cost of one atomic store:
// monotonic nanoseconds since base, so that a step of the wall clock is
// not mistaken for a stall. Zero means the loop is not running.
type beat struct {
	base time.Time
	ns   atomic.Int64
}

// at records a round at now (from time.Now, carrying its monotonic
// reading). It never stores zero, which means stopped.
func (b *beat) at(now time.Time) { b.ns.Store(max(int64(now.Sub(b.base)), 1)) }

func (b *beat) stop() { b.ns.Store(0) }

func (b *beat) last() (time.Time, bool) {
	ns := b.ns.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return b.base.Add(time.Duration(ns)), true
}
