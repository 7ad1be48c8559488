package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// System is the server a replication connection reached, as
// IDENTIFY_SYSTEM reports it: the history an LSN read on this connection
// belongs to. A physical standby shares its primary's system identifier; a
// promotion starts a new timeline, on which the LSNs past the switch point
// name other transactions; initdb and pg_upgrade make a new system.
type System struct {
	ID       string        // the system identifier, a decimal uint64
	Timeline int32         // the timeline the server is on
	WALEnd   pglogrepl.LSN // the server's WAL flush position when asked
	Database string        // the database the connection is to
}

// System asks the server who it is. Ask before Start: once streaming, the
// connection accepts no command until the stream ends.
func (s *Stream) System(ctx context.Context) (System, error) {
	if s.streaming {
		return System{}, errors.New("identify system: the connection is streaming; ask before Start")
	}
	r, err := s.conn.IdentifySystem(ctx)
	if err != nil {
		return System{}, fmt.Errorf("identify system: %w", err)
	}
	return System{ID: r.SystemID, Timeline: r.Timeline, WALEnd: r.XLogPos, Database: r.DBName}, nil
}

// IdentifySystem sends IDENTIFY_SYSTEM.
func (c pgConn) IdentifySystem(ctx context.Context) (pglogrepl.IdentifySystemResult, error) {
	return pglogrepl.IdentifySystem(ctx, c.PgConn)
}

// Identify asks the server at url who it is, on a replication connection
// of its own, closed before it returns.
func Identify(ctx context.Context, url string) (System, error) {
	pc, err := pgconn.ParseConfig(url)
	if err != nil {
		return System{}, fmt.Errorf("parse postgres url: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "outbox-cdc"
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return System{}, fmt.Errorf("open replication connection: %w", err)
	}
	defer conn.Close(context.Background())
	r, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return System{}, fmt.Errorf("identify system: %w", err)
	}
	return System{ID: r.SystemID, Timeline: r.Timeline, WALEnd: r.XLogPos, Database: r.DBName}, nil
}
