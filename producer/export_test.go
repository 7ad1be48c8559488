package producer

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// Test hooks: what the tests cannot see, or break, through the Writer's
// API and a fake cluster. They read the writer's own records (atomics,
// and its parts through their owners' methods), never its locks.

// peakInFlight returns the most produce requests a sender had out at
// once: what pipelining reached.
func (w *Writer) peakInFlight() int { return int(w.index.peak.Load()) }

// slowestRoundTrip returns the longest round trip a sender recorded,
// which paces a trickle beside a backlog (partition.dueAt).
func (w *Writer) slowestRoundTrip() time.Duration { return time.Duration(w.index.slowest.Load()) }

// dialBreaker fails the writer's next dial once armed (breakConnection).
type dialBreaker struct {
	w    *Writer
	fail atomic.Bool
}

// dialBreaker wraps w's dialer so that breakConnection can fail its next
// dial. Call it before the first event: no sender runs yet to read the
// dialer, and the senders started later see the wrapper.
func (w *Writer) dialBreaker() *dialBreaker {
	b := &dialBreaker{w: w}
	real := w.dialer.Dial
	w.dialer.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if b.fail.CompareAndSwap(true, false) {
			return nil, errors.New("connection refused (test)")
		}
		if real == nil {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		return real(ctx, network, addr)
	}
	return b
}

// breakConnection closes broker's sender's connection, and fails the
// writer's next dial: the sender's next request finds the connection
// broken and cannot dial it again at once. Call it from Config.Hold,
// which runs on the sender's own goroutine, the owner of its connection.
func (b *dialBreaker) breakConnection(broker int32) {
	s := b.w.index.running(broker)
	if s == nil || s.conn == nil {
		return
	}
	b.fail.Store(true)
	s.conn.Close()
}

// forgetCount drops the writer's cached partition count of topic, as a
// failed background refresh does (a pending drain stays).
func (w *Writer) forgetCount(topic string) { w.routes.forget(topic) }
