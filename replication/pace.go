package replication

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// pacedDial wraps dial's connections in pacedConn.
func pacedDial(dial pgconn.DialFunc, gap time.Duration) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &pacedConn{Conn: conn, gap: gap}, nil
	}
}

// pacedFull is what a read must bring not to count as short: a quarter of
// pgproto3's usual 8 KiB buffer. A message larger than that buffer is read
// into one of its own size, and reads of a few KiB of it are not short.
const pacedFull = 8192 / 4

// pacedConn spaces the reads of a replication connection on which the
// server has little to say. The walsender sends each message of a
// transaction as it decodes it, so at a few thousand single-row
// transactions a second a reader that reads whenever it can wakes, reads
// a message or two and sleeps again, several times a millisecond: the
// system call and the scheduler's wake-up then cost more than decoding the
// message. After a read that brought less than pacedFull (or filled less
// than a quarter of a smaller buffer), the next read waits until gap has
// passed since it, and returns all that arrived meanwhile. A busy stream (a
// backlog) is read without a pause. The cost is latency: at most gap per
// read. The pause ends halfway to the read deadline (SetReadDeadline):
// Go times out a read that starts past its deadline without looking at
// the data waiting, so a pause past it would read nothing, for ever.
//
// One goroutine reads at a time (pgconn's, or its bgreader's under the
// same lock); SetReadDeadline may come from another (a context ending).
type pacedConn struct {
	net.Conn
	gap      time.Duration
	last     time.Time // when the last read returned
	short    bool      // it brought little
	deadline atomicTime
}

func (c *pacedConn) SetReadDeadline(t time.Time) error {
	c.deadline.store(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *pacedConn) SetDeadline(t time.Time) error {
	c.deadline.store(t)
	return c.Conn.SetDeadline(t)
}

func (c *pacedConn) Read(p []byte) (int, error) {
	if c.short {
		wait := c.gap - time.Since(c.last)
		if d := c.deadline.load(); !d.IsZero() {
			wait = min(wait, time.Until(d)/2)
		}
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	n, err := c.Conn.Read(p)
	c.last, c.short = time.Now(), n < min(len(p), 4*pacedFull)/4
	return n, err
}

// atomicTime is a time another goroutine may set: nanoseconds since the
// Unix epoch, 0 for the zero time.
type atomicTime struct{ ns atomic.Int64 }

func (a *atomicTime) store(t time.Time) {
	if t.IsZero() {
		a.ns.Store(0)
		return
	}
	a.ns.Store(t.UnixNano())
}

func (a *atomicTime) load() time.Time {
	if ns := a.ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
