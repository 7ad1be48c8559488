package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgConn is a Stream's connection to a server: pglogrepl's replication
// commands need the *pgconn.PgConn itself, so they are called here.
type pgConn struct {
	*pgconn.PgConn
}

func (c pgConn) StartReplication(ctx context.Context, slot string, start pglogrepl.LSN, opts pglogrepl.StartReplicationOptions) error {
	return pglogrepl.StartReplication(ctx, c.PgConn, slot, start, opts)
}

// SetReadDeadline sets the socket's: a read deadline costs nothing per
// message, where a context on each ReceiveMessage does (see Stream.Run).
func (c pgConn) SetReadDeadline(t time.Time) error {
	return c.Conn().SetReadDeadline(t)
}

// SendStandbyStatusUpdate sends ssu as it is, except that pglogrepl replaces
// a zero flush or apply position with the write position. ctx's deadline
// bounds the write (pglogrepl ignores ctx): a server that stops reading
// would otherwise block it for good once the socket buffers are full.
func (c pgConn) SendStandbyStatusUpdate(ctx context.Context, ssu pglogrepl.StandbyStatusUpdate) error {
	if d, ok := ctx.Deadline(); ok {
		if err := c.Conn().SetWriteDeadline(d); err != nil {
			return fmt.Errorf("set the write deadline: %w", err)
		}
		defer c.Conn().SetWriteDeadline(time.Time{}) //nolint:errcheck // the next write sets its own
	}
	return pglogrepl.SendStandbyStatusUpdate(ctx, c.PgConn, ssu)
}
