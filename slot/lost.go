package slot

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Loss is why a replication slot cannot continue: the cause a heal
// (--on-slot-lost heal) names in its log line and its metric's label.
type Loss string

// Losses. LossDropped and LossMissing are both a slot that does not exist;
// the relay tells them apart by when it finds it so.
const (
	LossNone Loss = "" // the slot exists and can stream
	// LossWALRemoved: invalidated by max_slot_wal_keep_size (before
	// PostgreSQL 17, every wal_status lost).
	LossWALRemoved Loss = "wal_removed"
	// LossIdleTimeout: invalidated by idle_replication_slot_timeout (18).
	LossIdleTimeout Loss = "idle_timeout"
	// LossInvalidated: invalidated for another reason (rows_removed or
	// wal_level_insufficient, a standby's recovery conflict).
	LossInvalidated Loss = "invalidated"
	// LossDropped: gone while the relay streamed it (or stood by for it).
	LossDropped Loss = "dropped"
	// LossMissing: absent at start where it existed before: a failover
	// without slot sync, a restore, a drop while the relay was stopped.
	LossMissing Loss = "missing"
)

// Losses are every cause a heal may name, for metrics that export each
// from the start.
var Losses = []Loss{LossWALRemoved, LossIdleTimeout, LossInvalidated, LossDropped, LossMissing}

// lossRow is what pg_replication_slots says of an invalidation, on any
// version: wal_status (13+), conflicting (16+), invalidation_reason (17+).
type lossRow struct {
	walStatus, reason string
	conflicting       bool
	noConfirmed       bool // confirmed_flush_lsn is NULL
	// foreign: not a logical pgoutput slot of this database (a standby's
	// physical slot, another tool's, another database's).
	foreign bool
}

// loss classifies r. invalidation_reason, where the version has it, names
// the cause; before 17 a lost wal_status can only be wal_removed, and 16's
// conflicting is a standby's recovery conflict. A slot without a confirmed
// position cannot be streamed from either. A slot that is not the relay's
// kind (a standby's physical slot has no confirmed position) is no loss:
// ensureSlot refuses it and says to choose another --slot, and a heal
// never drops it.
func (r lossRow) loss() Loss {
	switch {
	case r.foreign:
		return LossNone
	case r.reason == string(LossWALRemoved):
		return LossWALRemoved
	case r.reason == string(LossIdleTimeout):
		return LossIdleTimeout
	case r.reason != "" || r.conflicting:
		return LossInvalidated
	case r.walStatus == "lost":
		return LossWALRemoved
	case r.noConfirmed:
		return LossInvalidated
	}
	return LossNone
}

// lossColumns reads lossRow's columns on every supported version:
// to_jsonb names a column a version lacks as NULL rather than failing.
const lossColumns = `coalesce(s.wal_status, ''), coalesce(to_jsonb(s) ->> 'invalidation_reason', ''),
	coalesce((to_jsonb(s) ->> 'conflicting')::bool, false), s.confirmed_flush_lsn IS NULL, NOT (` + oursWhere + `)`

// oursWhere is the condition of pg_replication_slots s that the slot is
// one the relay could have made: logical, pgoutput, in this database.
const oursWhere = `s.slot_type = 'logical' AND s.plugin IS NOT DISTINCT FROM 'pgoutput' AND s.database IS NOT DISTINCT FROM current_database()`

// SlotLoss says whether slot can stream: LossNone; LossMissing when it
// does not exist; otherwise the invalidation's cause. A slot of another
// kind or database under the name is LossNone, left to ensureSlot's
// refusal.
func SlotLoss(ctx context.Context, conn *pgx.Conn, slot string) (Loss, error) {
	var r lossRow
	err := conn.QueryRow(ctx, `SELECT `+lossColumns+` FROM pg_replication_slots s WHERE s.slot_name = $1`, slot).
		Scan(&r.walStatus, &r.reason, &r.conflicting, &r.noConfirmed, &r.foreign)
	if errors.Is(err, pgx.ErrNoRows) {
		return LossMissing, nil
	}
	if err != nil {
		return LossNone, fmt.Errorf("read replication slot %q: %w", slot, err)
	}
	return r.loss(), nil
}

// lostWhere is the condition of pg_replication_slots s that the slot
// cannot stream, as lossRow.loss judges it.
const lostWhere = `(s.wal_status = 'lost' OR s.confirmed_flush_lsn IS NULL OR to_jsonb(s) ->> 'invalidation_reason' IS NOT NULL
	OR coalesce((to_jsonb(s) ->> 'conflicting')::bool, false))`

// DropLost drops slot if it is still invalidated, a logical pgoutput slot
// of this database (never a standby's physical slot or another tool's
// under the name), and no process holds it, in one statement, and reports
// whether it did. Only a lost slot is dropped: an instance that raced this
// one to heal has created a new slot under the name, which is not lost,
// and is kept. A lost slot that a process still holds (its walsender not
// yet ended) is ErrLostSlotHeld, which the relay waits out as it waits for
// a slot another instance streams.
func DropLost(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	// A top-level SELECT evaluates its list for each row WHERE keeps, so
	// the drop runs exactly when the slot is lost and free.
	tag, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(s.slot_name) FROM pg_replication_slots s
		WHERE s.slot_name = $1 AND NOT s.active AND `+oursWhere+` AND `+lostWhere, slot)
	if err != nil {
		return false, fmt.Errorf("drop the invalidated replication slot %q: %w", slot, err)
	}
	if tag.RowsAffected() > 0 {
		return true, nil
	}
	var held bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.slot_name = $1 AND s.active AND `+oursWhere+` AND `+lostWhere+`)`,
		slot).Scan(&held); err != nil {
		return false, fmt.Errorf("read replication slot %q: %w", slot, err)
	}
	if held {
		return false, lostHeld(slot)
	}
	return false, nil
}

// lostHeld is DropLost's error for a lost slot a process still holds.
func lostHeld(slot string) error {
	return fmt.Errorf("%w: slot %q is invalidated and a process still holds it (pg_replication_slots.active_pid): healing it once that process ends",
		ErrLostSlotHeld, slot)
}
