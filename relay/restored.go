package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
)

// nextXid reads the next full transaction id of the server at url; a
// variable for the tests, which have no server.
var nextXid = serverNextXid

// serverNextXid is the next full transaction id of the server at url: the
// xmax of a snapshot, which assigns no id (pg_current_xact_id would) and
// answers on a standby too.
func serverNextXid(ctx context.Context, url string) (uint64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	var text string
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&text); err != nil {
		return 0, fmt.Errorf("read the server's next transaction id: %w", err)
	}
	next, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the server's next transaction id: %q: %w", text, err)
	}
	return next, nil
}

// checkNotRestored refuses a checkpoint the session is about to trust (it
// is ahead of the slot) when the server has not assigned its transaction
// yet: the database was restored, and skipping to the checkpoint would
// skip its new transactions. The error is checkpoint.ErrRestored, which
// stops the relay, naming the reset.
func (r *Relay) checkNotRestored(ctx context.Context, rec checkpoint.Record, key string) error {
	if !rec.HasXid() {
		r.log.Info("exactly-once: the checkpoint names no transaction: not checked against the server's transaction ids",
			slog.String("slot", r.cfg.Slot.Name), slog.String("end_lsn", rec.EndLSN.String()), slog.Any("xid", rec.Xid))
		return nil
	}
	next, err := nextXid(ctx, r.cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("exactly-once: check the checkpoint's transaction against the server's next transaction id: %w", err)
	}
	if err := checkpoint.CheckXid(rec, next); err != nil {
		return fmt.Errorf("exactly-once: slot %s: %w. Starting at the checkpoint would skip the server's new transactions. "+
			"Reset the slot's checkpoint with a tombstone under its key %q in %s (docs/exactly-once.md#operations): the relay then starts from the slot",
			r.cfg.Slot.Name, err, key, r.cfg.Delivery.CheckpointTopic)
	}
	return nil
}
