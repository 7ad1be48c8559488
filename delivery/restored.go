package delivery

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
)

// checkNotRestored refuses a checkpoint the session is about to trust (it
// is ahead of the slot) when the server has not assigned its transaction
// yet: the database was restored, and skipping to the checkpoint would
// skip its new transactions. The error is checkpoint.ErrRestored, which
// stops the relay, naming the reset.
func (m *exactlyOnceMode) checkNotRestored(ctx context.Context, rec checkpoint.Record, key string) error {
	if !rec.HasXid() {
		m.env.Log.Info("exactly-once: the checkpoint names no transaction: not checked against the server's transaction ids",
			slog.String("slot", m.cfg.Slot), slog.String("end_lsn", rec.EndLSN.String()), slog.Any("xid", rec.Xid))
		return nil
	}
	next, err := m.env.NextXid(ctx)
	if err != nil {
		return fmt.Errorf("exactly-once: check the checkpoint's transaction against the server's next transaction id: %w", err)
	}
	if err := checkpoint.CheckXid(rec, next); err != nil {
		return fmt.Errorf("exactly-once: slot %s: %w. Starting at the checkpoint would skip the server's new transactions. "+
			"Reset the slot's checkpoint with a tombstone under its key %q in %s (docs/exactly-once.md#operations): the relay then starts from the slot",
			m.cfg.Slot, err, key, m.cfg.CheckpointTopic)
	}
	return nil
}
