package relay

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Both modes record the slot as known here (backfill.HealTable) once it
// exists: a heal recognizes a missing slot only where this database says
// it existed, and a relay that ran with --on-slot-lost fail, or a slot
// `setup` made, would otherwise be taken for a first start by a later
// heal, and the rows committed while the slot was lost never published.

// prepareFailing is prepare with --on-slot-lost fail: the usual
// preparation, which creates a missing slot and refuses a lost one, as it
// always did; but a missing slot this database recorded before is named
// in one warning (decideFail), and the slot is recorded once it exists.
// Both are best effort: a role that may not read or write the heal table
// changes nothing of what fail does.
func (r *Relay) prepareFailing(ctx context.Context, usual func(context.Context) (pglogrepl.LSN, error)) (pglogrepl.LSN, error) {
	if len(r.target.Tables) == 0 {
		return usual(ctx) // messages only: no schema to record in, nothing a heal could read
	}
	f, err := r.lookAtSlot(ctx)
	if err != nil {
		r.log.Debug("could not read whether the slot was recorded here", slog.String("slot", r.target.Slot), slog.Any("err", err))
	}
	warn, record := decideFail(f)
	if warn && err == nil {
		r.warnKnownSlotMissing()
	}
	start, err := usual(ctx)
	if err != nil || !record {
		return start, err
	}
	if err := r.recordSlot(ctx); err != nil {
		r.log.Debug("could not record the slot as known here: --on-slot-lost heal would take it for a first start if it went missing",
			slog.String("slot", r.target.Slot), slog.Any("err", err))
	}
	return start, nil
}

// decideFail says, with --on-slot-lost fail, whether to warn that a slot
// known here is missing (the usual preparation creates it anew) and
// whether to record the slot once it exists.
func decideFail(f healFacts) (warn, record bool) {
	known := f.known || f.backfilled
	return f.loss == slot.LossMissing && known, !f.known && (f.loss == slot.LossNone || f.loss == slot.LossMissing)
}

// warnKnownSlotMissing is fail mode's one warning for a slot this
// database recorded that is gone.
func (r *Relay) warnKnownSlotMissing() {
	r.log.Warn("replication slot missing though it existed here before (a failover without slot sync, a restore from a backup, a drop while "+
		"the relay was stopped): creating it anew; events committed since it was lost may be missing from Kafka. "+
		"--on-slot-lost heal (with --cleanup) republishes them from the outbox", slog.String("slot", r.target.Slot))
}

// lookAtSlot reads the slot's state and what this database recorded of
// it: whether it is known here, and whether a backfill of it is.
func (r *Relay) lookAtSlot(ctx context.Context) (healFacts, error) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return healFacts{}, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	return r.readSlotFacts(ctx, conn)
}

// readSlotFacts reads the slot's loss, its heal record, and whether a
// backfill of it is recorded.
func (r *Relay) readSlotFacts(ctx context.Context, conn *pgx.Conn) (healFacts, error) {
	var f healFacts
	var err error
	if f.loss, err = slot.SlotLoss(ctx, conn, r.target.Slot); err != nil {
		return f, err
	}
	if f.record, f.known, err = backfill.ReadHeal(ctx, conn, r.healSchema(), r.target.Slot); err != nil {
		return f, err
	}
	states, err := backfill.ReadStates(ctx, conn, r.healSchema(), r.target.Slot)
	if err != nil {
		return f, fmt.Errorf("read the backfills of slot %q: %w", r.target.Slot, err)
	}
	f.backfilled = len(states) > 0
	return f, nil
}

// recordSlot records the slot as known here (backfill.RecordSlot).
func (r *Relay) recordSlot(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	return backfill.RecordSlot(ctx, conn, r.healSchema(), r.target.Slot)
}
