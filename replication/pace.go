package replication

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
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
		return newPacedConn(conn, gap), nil
	}
}

// newPacedConn paces conn's reads by gap; a TCP connection's pauses wait
// on its low-water mark (lowWater).
func newPacedConn(conn net.Conn, gap time.Duration) *pacedConn {
	c := &pacedConn{Conn: conn, gap: gap}
	if tc, ok := conn.(*net.TCPConn); ok && lowWaterSupported {
		c.raw, _ = tc.SyscallConn()
	}
	return c
}

// pacedFull is what a read must bring not to count as short: a quarter of
// pgproto3's usual 8 KiB buffer. A message larger than that buffer is read
// into one of its own size, and reads of a few KiB of it are not short.
const pacedFull = 8192 / 4

// lowWater is the SO_RCVLOWAT of a paced TCP connection while the server
// sends little: the kernel wakes a reader waiting on the socket only once
// this much arrived (or the pause ends). Half pgproto3's usual buffer.
const lowWater = 8192 / 2

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
// On a TCP connection the pause is a wait on the socket with the
// low-water mark raised to lowWater, not a sleep: a sleeping process is
// still woken by each segment the walsender sends (Go's poller hears every
// arrival), which is most of what pacing would save. The wait ends early
// once lowWater arrived; when the pause passed and nothing at all came,
// the stream is quiet: the mark goes back to 1 byte and the read waits
// for the next message as any read does, so an idle stream costs no
// wake-ups and its next message no pause.
//
// One goroutine reads at a time (pgconn's, or its bgreader's under the
// same lock); SetReadDeadline may come from another (a context ending).
type pacedConn struct {
	net.Conn
	raw    syscall.RawConn // the TCP socket's, for its low-water mark; nil: pauses sleep
	gap    time.Duration
	last   time.Time // when the last read returned
	short  bool      // it brought little
	raised bool      // the socket's low-water mark is lowWater

	mu       sync.Mutex
	deadline time.Time // the caller's read deadline
	own      time.Time // while a pause waits on the socket: the read deadline it set
}

func (c *pacedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetReadDeadline(c.effective())
}

func (c *pacedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(c.effective())
}

// effective is the read deadline in force: the caller's, or the earlier
// of it and a pause's. Called with mu held.
func (c *pacedConn) effective() time.Time {
	if c.own.IsZero() || !c.deadline.IsZero() && c.deadline.Before(c.own) {
		return c.deadline
	}
	return c.own
}

// pause is how long the read after a short one waits: until gap passed
// since it, and no further than halfway to the caller's deadline.
func (c *pacedConn) pause() time.Duration {
	wait := c.gap - time.Since(c.last)
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	if !d.IsZero() {
		wait = min(wait, time.Until(d)/2)
	}
	return wait
}

func (c *pacedConn) Read(p []byte) (n int, err error) {
	switch {
	case c.raw != nil && (c.short || c.raised):
		n, err = c.readLowWater(p)
	case c.short:
		if wait := c.pause(); wait > 0 {
			time.Sleep(wait)
		}
		n, err = c.Conn.Read(p)
	default:
		n, err = c.Conn.Read(p)
	}
	// A read that failed (a deadline: Run's, every few ms on an idle
	// stream) says nothing of a flowing stream.
	c.last, c.short = time.Now(), err == nil && n < min(len(p), 4*pacedFull)/4
	return n, err
}

// readLowWater is a TCP connection's read after a short one, and after any
// read since, until the stream goes quiet: with the mark raised a plain
// read would wait for lowWater bytes. It waits for lowWater bytes or the
// pause (data waiting already, as in a backlog, returns at once), then
// reads what is there; nothing at all is a quiet stream, read as usual
// with the mark back at 1 byte. The mark then stays raised while the
// stream flows, which spares two system calls a pause.
func (c *pacedConn) readLowWater(p []byte) (int, error) {
	if !c.raised {
		if err := setLowWater(c.raw, lowWater); err != nil {
			c.raw = nil // pauses sleep from now on
			return c.Conn.Read(p)
		}
		c.raised = true
	}
	if wait := c.pause(); wait > 0 {
		c.mu.Lock()
		c.own = time.Now().Add(wait)
		err := c.Conn.SetReadDeadline(c.effective())
		if err != nil {
			c.own = time.Time{}
		}
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		c.mu.Lock()
		c.own = time.Time{}
		derr := c.Conn.SetReadDeadline(c.deadline)
		c.mu.Unlock()
		if n > 0 || err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if derr != nil {
			return 0, derr
		}
	}
	n, err := readNow(c.raw, p) // an error: the caller's deadline passed meanwhile, or the connection's
	if err != nil {
		if err == io.EOF { // as net.Conn's Read says it, unwrapped
			return 0, err
		}
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n > 0 {
		return n, nil
	}
	if err := setLowWater(c.raw, 1); err != nil {
		return 0, err // the mark stays raised: a plain read would wait for it
	}
	c.raised = false
	return c.Conn.Read(p)
}
