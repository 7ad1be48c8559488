package slot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Watch runs beside a streaming session until ctx ends, every interval:
//
//   - It checks that the publication still carries the outbox table. A table
//     dropped and recreated (or removed from the publication) is no longer
//     published, and its inserts never reach the slot: Watch returns an
//     ErrNotReady saying how to recover, and the session stops loudly rather
//     than relay nothing in silence.
//
//   - While idle() reports nothing in flight and heartbeat is set, it writes
//     a tiny non-transactional logical decoding message. The message comes
//     back through the slot (see decode.KindHeartbeat) and its LSN is
//     confirmed: an outbox that sees no inserts still moves its slot, so the
//     WAL the slot retains stays bounded however busy other tables are.
//
//   - It reads where the slot stands and passes it to OnSlot, for metrics.
//
// Failures to reach Postgres are logged once per change of state and retried
// next interval; a role not allowed to call pg_logical_emit_message turns
// heartbeats off.
func Watch(ctx context.Context, cfg WatchConfig) error {
	t, log, heartbeat := cfg.Target, cfg.Logger, cfg.Heartbeat
	if log == nil {
		log = slog.Default()
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	failing := false
	for first := true; ; first = false {
		if !first { // the first round reads the slot for metrics at once
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		carried, err := watchOnce(ctx, &conn, cfg, heartbeat && cfg.Idle() && !first)
		if ctx.Err() != nil {
			return nil
		}
		var pgErr *pgconn.PgError
		switch {
		case err == nil && !carried:
			if moved, _ := renamed(ctx, conn, t); len(moved) > 0 {
				return fmt.Errorf("%w: outbox table %s was renamed to %s (ALTER TABLE … RENAME or SET SCHEMA); its inserts were relayed up to here, "+
					"followed by the table's OID; name it anew in --table (or the config file) and restart outbox-cdc", ErrNotReady, moved[0][0], moved[0][1])
			}
			missing, _ := missingFromPublication(ctx, conn, t)
			return fmt.Errorf("%w: table %s is no longer in publication %q (dropped and recreated, or removed from it), so its inserts no longer reach the slot. "+
				"Run ALTER PUBLICATION %s ADD TABLE %s; reconcile the rows inserted into it since (they were not relayed); then restart outbox-cdc",
				ErrNotReady, quotedList(missing), t.Publication, pgx.Identifier{t.Publication}.Sanitize(), quotedList(missing))
		case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
			log.Warn("heartbeats off: the role may not call pg_logical_emit_message; an idle outbox then confirms WAL only on keepalives",
				slog.String("err", pgErr.Message))
			heartbeat = false
		case err != nil && !failing:
			failing = true
			log.Warn("catalog check or heartbeat failed; retrying each interval", slog.Any("err", err))
		case err == nil && failing:
			failing = false
			log.Info("catalog check and heartbeat succeeding again")
		}
	}
}

// WatchConfig is what Watch needs.
type WatchConfig struct {
	URL       string
	Target    Target
	Interval  time.Duration
	Heartbeat bool        // write heartbeats while idle
	Idle      func() bool // reports nothing in flight
	OnSlot    func(SlotState)
	Logger    *slog.Logger
}

func watchOnce(ctx context.Context, conn **pgx.Conn, cfg WatchConfig, beat bool) (carried bool, err error) {
	url, t := cfg.URL, cfg.Target
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return false, err
		}
		*conn = c
	}
	defer func() {
		if err != nil {
			(*conn).Close(context.Background())
			*conn = nil
		}
	}()
	st, err := ReadSlotState(ctx, *conn, t)
	if err != nil {
		return false, err
	}
	if cfg.OnSlot != nil {
		cfg.OnSlot(st)
	}
	if !st.Publication || !beat {
		return st.Publication, nil
	}
	_, err = (*conn).Exec(ctx, `SELECT pg_logical_emit_message(false, $1, '')`, decode.HeartbeatPrefix)
	return true, err
}
