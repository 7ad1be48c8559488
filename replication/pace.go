package replication

import (
	"context"
	"net"
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

// pacedConn spaces the reads of a replication connection on which the
// server has little to say. The walsender sends each message of a
// transaction as it decodes it, so at a few thousand single-row
// transactions a second a reader that reads whenever it can wakes, reads
// a message or two and sleeps again, several times a millisecond: the
// system call and the scheduler's wake-up then cost more than decoding the
// message. After a read that filled less than a quarter of its buffer, the
// next read waits until gap has passed since it, and returns all that
// arrived meanwhile. A busy stream (a backlog fills the buffer on each
// read) is read without a pause. The cost is latency: at most gap, once
// per read.
type pacedConn struct {
	net.Conn
	gap   time.Duration
	last  time.Time // when the last read returned
	short bool      // it filled less than a quarter of its buffer
}

func (c *pacedConn) Read(p []byte) (int, error) {
	if c.short {
		if wait := c.gap - time.Since(c.last); wait > 0 {
			time.Sleep(wait)
		}
	}
	n, err := c.Conn.Read(p)
	c.last, c.short = time.Now(), n < len(p)/4
	return n, err
}
