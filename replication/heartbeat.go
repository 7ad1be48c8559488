package replication

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Heartbeat writes a tiny non-transactional logical decoding message every
// interval while idle() reports nothing in flight, until ctx ends. The
// message comes back through the slot (see decode.KindHeartbeat), and its
// LSN is confirmed: an outbox that sees no inserts still moves its slot, so
// the WAL the slot retains stays bounded however busy other tables are.
//
// Failures are logged once per change of state and retried next interval;
// a role not allowed to call pg_logical_emit_message turns heartbeats off.
func Heartbeat(ctx context.Context, url string, interval time.Duration, idle func() bool, log *slog.Logger) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !idle() {
			continue
		}
		err := beat(ctx, &conn, url)
		if ctx.Err() != nil {
			return
		}
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
			log.Warn("heartbeats off: the role may not call pg_logical_emit_message; an idle outbox then confirms WAL only on server keepalives",
				slog.String("err", pgErr.Message))
			return
		case err != nil && !failing:
			failing = true
			log.Warn("heartbeat failed; retrying each interval", slog.Any("err", err))
		case err == nil && failing:
			failing = false
			log.Info("heartbeat succeeding again")
		}
	}
}

func beat(ctx context.Context, conn **pgx.Conn, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		*conn = c
	}
	_, err := (*conn).Exec(ctx, `SELECT pg_logical_emit_message(false, $1, '')`, decode.HeartbeatPrefix)
	if err != nil {
		(*conn).Close(context.Background())
		*conn = nil
	}
	return err
}
