package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// A heal (--on-slot-lost heal) is a backfill: every row the cleanup has
// not settled (cleanup.Unpublished) is published from the snapshot a new
// slot exports, in the backfill's order, and the stream takes over at the
// slot's consistent point; so every event committed to a table reaches
// Kafka, whatever WAL the lost slot missed. It triggers:
//
//   - at start, on a slot that is invalidated, or missing where this
//     database recorded it (backfill.HealTable, which a base backup and a
//     failover carry and a slot does not): cause missing. A slot missing on
//     a first start (nothing recorded) is created as before, without a
//     heal: rows already in the outbox then are the cutover's business
//     (--backfill-where), as without heal, and a relay adopting an outbox a
//     poller still serves does not publish its whole history;
//   - before each later session (reprepare), on a slot that a session
//     found dropped (cause dropped) or invalidated. The session that lost
//     it drains first where it can (see drainLost): what was in flight
//     is published and cleaned, and not read again;
//   - on a heal recorded as under way: cut short, it is resumed.
//
// The backfill's store lock makes one instance heal: another waits, then
// finds the new slot and its done records, and streams (standing by).
//
// What a heal can publish twice: the rows Kafka acknowledged and the
// cleanup had not yet deleted or marked when the slot was lost (at least
// once, each acknowledged row's DELETE or UPDATE is batched after the ack;
// in exactly-once, the rows of the last Kafka transaction committed, which
// are cleaned after its commit), and rows a dead letter kept
// (delete-after-publish keeps them; --mark-dead settles them). The count
// of rows a heal published is logged and counted: at-least-once consumers
// see no more duplicates than that from a heal that ran through; one cut
// short and resumed also publishes again the rows it had published since
// it last recorded its progress, which the count does not count twice.
// Logical decoding messages of the lost range are in no table and are
// lost.

// heals says whether --on-slot-lost heal is set.
func (r *Relay) heals() bool { return r.cfg.OnSlotLost == SlotLostHeal }

// healFacts are what decides a heal, read before the backfill's lock.
type healFacts struct {
	loss         slot.Loss
	afterSession bool // a session of this process ran before
	moved        bool // the server is not the one this process first found (a failover, a restore)
	known        bool // the heal table records the slot
	backfilled   bool // the progress table records a backfill of it
	record       backfill.HealRecord
}

// decideHeal returns the cause of the heal due (slot.LossNone: none) and
// whether the slot is to be recorded as known here before streaming.
func decideHeal(f healFacts) (cause slot.Loss, record bool) {
	switch {
	case f.record.Unfinished():
		if f.record.Cause == "" {
			return slot.LossMissing, false
		}
		return slot.Loss(f.record.Cause), false
	case f.loss == slot.LossNone:
		return slot.LossNone, !f.known
	case f.loss != slot.LossMissing:
		return f.loss, false
	case f.afterSession && !f.moved:
		return slot.LossDropped, false
	case f.afterSession: // gone with a failover or a restore under a session
		return slot.LossMissing, false
	case f.known || f.backfilled:
		return slot.LossMissing, false
	}
	return slot.LossNone, true // a first start
}

// healSpecs are the heal's backfills: every table, its unsettled rows
// (cleanup.Unpublished) narrowed by its --where, in its --backfill-order.
// A --backfill-where does not widen it: with cleanup, the rows it selects
// that still need publishing are unsettled ones.
func healSpecs(cfg Config) ([]backfill.Spec, error) {
	tables := cfg.CleanupTables()
	specs := make([]backfill.Spec, len(cfg.Tables))
	for i, t := range cfg.Tables {
		where, err := cleanup.Unpublished(cfg.Cleanup, tables[i])
		if err != nil {
			return nil, err
		}
		specs[i] = backfill.Spec{Where: where, RowFilter: t.Where, Order: t.Backfill.Order}
	}
	return specs, nil
}

// prepareHealing is prepare with --on-slot-lost heal: it heals when
// decideHeal says so, and otherwise readies the slot as usual does.
// afterSession says a session of this process ran before. A slot lost
// between the look and usual's (which refuses it, as --on-slot-lost fail
// does) is healed then.
func (r *Relay) prepareHealing(ctx context.Context, afterSession bool, usual func(context.Context) (pglogrepl.LSN, error)) (pglogrepl.LSN, error) {
	start, err := r.healOrPrepare(ctx, afterSession, usual)
	if errors.Is(err, slot.ErrSlotInvalidated) {
		start, err = r.healOrPrepare(ctx, true, usual)
	}
	return start, heldAsActive(err)
}

// heldAsActive makes a lost slot that a process still holds
// (slot.ErrLostSlotHeld: its walsender has not ended) a slot in use
// (replication.ErrSlotActive), which the relay stands by for, at start as
// after a session, and heals once it is let go.
func heldAsActive(err error) error {
	if errors.Is(err, slot.ErrLostSlotHeld) && !errors.Is(err, replication.ErrSlotActive) {
		return fmt.Errorf("%w: %w", replication.ErrSlotActive, err)
	}
	return err
}

// healOrPrepare is one try of prepareHealing.
func (r *Relay) healOrPrepare(ctx context.Context, afterSession bool, usual func(context.Context) (pglogrepl.LSN, error)) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	if err := slot.PrepareTables(ctx, conn, r.target); err != nil {
		return 0, err
	}
	if !afterSession {
		if err := r.checkHeal(ctx, conn); err != nil {
			return 0, err
		}
	}
	f, err := r.readHealFacts(ctx, conn, afterSession)
	if err != nil {
		return 0, err
	}
	cause, record := decideHeal(f)
	return preparation{
		usual: func(ctx context.Context) (pglogrepl.LSN, error) {
			conn.Close(context.Background())
			return usual(ctx)
		},
		heal: func(ctx context.Context, cause slot.Loss) (pglogrepl.LSN, error) {
			return r.heal(ctx, conn, cause, f.record)
		},
		record: r.recordSlot,
	}.follow(ctx, cause, record)
}

// preparation is what a heal decision acts through: the usual
// preparation, the heal, and the record that the slot exists here.
type preparation struct {
	usual  func(context.Context) (pglogrepl.LSN, error)
	heal   func(context.Context, slot.Loss) (pglogrepl.LSN, error)
	record func(context.Context) error
}

// follow acts on decideHeal's answer: cause, and whether to record the
// slot as known here. The record follows the slot: made before it, a
// creation that failed would turn the next start into a heal of every
// row in the outbox. A crash between the creation and the record leaves
// a slot that exists and is not recorded, which the next start records.
func (p preparation) follow(ctx context.Context, cause slot.Loss, record bool) (pglogrepl.LSN, error) {
	if cause != slot.LossNone {
		return p.heal(ctx, cause)
	}
	start, err := p.usual(ctx)
	if err != nil || !record {
		return start, err
	}
	return start, p.record(ctx)
}

// checkHeal refuses at start a heal that could not run (a --where, a
// --backfill-order that cannot follow commit order), before any slot is
// lost: refused only once the lost slot was dropped, it would leave a
// missing slot and nothing done.
func (r *Relay) checkHeal(ctx context.Context, conn *pgx.Conn) error {
	specs, err := healSpecs(r.cfg)
	if err != nil {
		return err
	}
	if err := backfill.Check(ctx, conn, backfill.Config{URL: r.cfg.PostgresURL, Target: r.target, Specs: specs}); err != nil {
		return fmt.Errorf("--on-slot-lost heal could not heal a lost slot of this outbox: %w", err)
	}
	return nil
}

// healSchema is where the heal table is: the progress table's schema.
func (r *Relay) healSchema() string { return r.target.Tables[0].Schema }

// readHealFacts reads the slot's state and what this database recorded of
// it (readSlotFacts), and whether the server moved.
func (r *Relay) readHealFacts(ctx context.Context, conn *pgx.Conn, afterSession bool) (healFacts, error) {
	f, err := r.readSlotFacts(ctx, conn)
	if err != nil {
		return f, err
	}
	f.afterSession = afterSession
	if f.loss == slot.LossMissing || r.served == nil {
		f.moved, err = r.serverMoved(ctx)
	}
	return f, err
}

// slotGoneForHeal says a session that lost its stream should drain what
// it holds rather than abandon it: with --on-slot-lost heal in
// at-least-once, once the slot is dropped or invalidated, nothing replays
// those events, and each one published and cleaned now is a row the heal
// does not publish again (in exactly-once the session does not ask:
// deliverer.drainsWhenSlotGone). A server that cannot be asked (the
// likelier cause of a lost stream) is not judged gone.
func (r *Relay) slotGoneForHeal() bool {
	if !r.heals() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), slotGoneTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	loss, err := slot.SlotLoss(ctx, conn, r.target.Slot)
	return err == nil && loss != slot.LossNone
}

// slotGoneTimeout bounds slotGoneForHeal's question.
const slotGoneTimeout = 5 * time.Second

// serverMoved reports whether the server is no longer the one the last
// heal decision found (see movedFrom), and records the server found.
func (r *Relay) serverMoved(ctx context.Context) (bool, error) {
	sys, err := replication.Identify(ctx, r.cfg.PostgresURL)
	if err != nil {
		return false, fmt.Errorf("identify the server: %w", err)
	}
	moved, served := movedFrom(r.served, sys)
	r.served = served
	return moved, nil
}

// movedFrom says whether sys is not the server served (another system
// identifier, or another timeline: a promotion), and returns the server
// to compare the next decision with: sys, once found, so that a failover
// is one move and a later drop on the new server is a drop. The first call
// (served nil) records sys and reports false.
func movedFrom(served *replication.System, sys replication.System) (bool, *replication.System) {
	if served == nil {
		return false, &sys
	}
	if sys.ID != served.ID || sys.Timeline != served.Timeline {
		return true, &sys
	}
	return false, served
}
