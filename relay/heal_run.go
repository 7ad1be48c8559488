package relay

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// heal runs the heal of cause on conn's server, under the backfill's lock,
// and returns where streaming starts: the new slot's consistent point.
// before is the slot's heal record as the decision read it.
func (r *Relay) heal(ctx context.Context, conn *pgx.Conn, cause slot.Loss, before backfill.HealRecord) (pglogrepl.LSN, error) {
	specs, err := healSpecs(r.cfg)
	if err != nil {
		return 0, err
	}
	entry := newBackfillEntry(r, r.delivery.Backfill(false, true))
	cfg := backfill.Config{
		URL: r.cfg.PostgresURL, Target: r.target, Specs: specs, Heal: true,
		ConfirmInterval: r.cfg.Stream.ConfirmInterval, DrainTimeout: r.cfg.Stream.DrainTimeout,
		Logger: r.log, Progress: r.backfillProgress, CommitInterval: max(r.cfg.Delivery.TransactionInterval, backfillCommitInterval),
		CleanGap: true, Committed: entry.bt.Committed(),
		BeforeCreate: func(ctx context.Context) error {
			if !before.Unfinished() {
				// Once per heal: one retried (a lost slot still held)
				// or resumed was announced when it began.
				r.warnHeal(cause)
			}
			return backfill.RecordHealStart(ctx, conn, r.healSchema(), r.target.Slot, cause)
		},
	}
	// Healing from here, the wait for another instance's heal (its lock)
	// included: the start-up timeout is extended meanwhile, and a
	// standby's poll is not watched.
	r.live.backfilling.Store(true)
	defer r.live.backfilling.Store(false)
	plan, err := backfill.Prepare(ctx, conn, cfg)
	if err != nil {
		return 0, err
	}
	now, _, err := backfill.ReadHeal(ctx, conn, r.healSchema(), r.target.Slot)
	outcome := judgeHeal(plan.Created(), plan.Due(), before, now)
	if err != nil || outcome == healOver {
		plan.Close()
		if err != nil {
			return 0, err
		}
		if plan, err = r.healOver(ctx, conn, cause, cfg, entry); err != nil {
			return 0, err
		}
	}
	defer plan.Close()
	switch outcome {
	case healResume:
		r.log.Info("resuming a heal of the slot cut short", slog.String("slot", r.target.Slot), slog.String("cause", string(cause)))
	case healDone:
		r.log.Info("the slot was healed already (by another instance, or by a heal cut short once its rows were published): streaming it", slog.String("slot", r.target.Slot))
		return r.healed(ctx, conn)
	}
	if err := plan.Run(ctx, entry.entry()); err != nil || ctx.Err() != nil {
		return 0, err
	}
	if err := entry.bt.Seal(ctx); err != nil {
		return 0, err
	}
	return r.healed(ctx, conn)
}

// warnHeal is the heal's one warning, as it begins.
func (r *Relay) warnHeal(cause slot.Loss) {
	attrs := []any{slog.String("slot", r.target.Slot), slog.String("cause", string(cause)), slog.String("tables", r.cfg.TableNames())}
	if p := r.cfg.Messages.Prefix; p != "" {
		attrs = append(attrs, slog.String("messages_not_healed", p))
	}
	r.log.Warn("replication slot lost: healing from the outbox", attrs...)
}

// healed records the end of a heal (this instance's, or one cut short
// whose end nobody recorded), reports it (healEnded) and returns the new
// slot's position.
func (r *Relay) healed(ctx context.Context, conn *pgx.Conn) (pglogrepl.LSN, error) {
	states, err := backfill.ReadStates(ctx, conn, r.healSchema(), r.target.Slot)
	if err != nil {
		return 0, fmt.Errorf("read the heal of slot %q: %w", r.target.Slot, err)
	}
	var rows int64
	for _, t := range r.cfg.Tables {
		rows += states[t.Qualified()].Done
	}
	rec, ended, err := backfill.RecordHealEnd(ctx, conn, r.healSchema(), r.target.Slot, rows)
	if err != nil {
		return 0, err
	}
	r.healEnded(rec, ended)
	return slot.Prepare(ctx, conn, r.target, false)
}

// healEnded counts and logs the heal rec when this instance's
// RecordHealEnd ended it (ended), whichever instance ran it: a heal cut
// short after publishing its rows (a SIGTERM, a crash before its end was
// recorded) is ended, and reported, by the next start or another
// instance; and each heal is reported once.
func (r *Relay) healEnded(rec backfill.HealRecord, ended bool) {
	if !ended || rec.Started == nil || rec.Finished == nil {
		return
	}
	r.metrics.SlotHealed(slot.Loss(rec.Cause), rec.Rows, *rec.Finished)
	r.log.Info("slot healed", slog.String("slot", r.target.Slot), slog.String("cause", rec.Cause), slog.Int64("rows", rec.Rows),
		slog.Duration("took", rec.Finished.Sub(*rec.Started).Round(time.Millisecond)))
}

// healOutcome is what a decided heal finds under the backfill's lock.
type healOutcome int

const (
	healFresh  healOutcome = iota // it created the slot: heal from its snapshot
	healResume                    // a heal cut short: resume it
	healDone                      // healed already: record its end, stream
	healOver                      // a slot something else made: heal over it
)

func (o healOutcome) String() string {
	return [...]string{"fresh", "resume", "done", "over"}[o]
}

// judgeHeal says what a decided heal does, from what Prepare did (created
// the slot, found tables due) and the slot's heal record before the
// decision and under the lock. A slot it did not create with nothing due
// is healed already only when the record says so: a heal under way at the
// decision (cut short once its rows were published), or one that began
// since; any other maker of the slot is healed over.
func judgeHeal(created, due bool, before, now backfill.HealRecord) healOutcome {
	switch {
	case created:
		return healFresh
	case due:
		return healResume
	case before.Unfinished(): // this heal, or another's, cut short once its rows were published
		return healDone
	case now.Heals > before.Heals, now.Started != nil && (before.Started == nil || now.Started.After(*before.Started)):
		return healDone // another instance healed it since the decision
	}
	return healOver
}

// healOver heals over a slot that something other than a heal made after
// the slot was lost (a relay with --on-slot-lost fail, setup, an
// operator): streaming it as it is would skip what the lost slot missed.
// The heal is a forced backfill (in a snapshot of its own, at least once:
// rows committed after the slot was made are streamed and published
// again), announced and recorded as any heal.
func (r *Relay) healOver(ctx context.Context, conn *pgx.Conn, cause slot.Loss, cfg backfill.Config, entry *backfillEntry) (*backfill.Plan, error) {
	r.log.Warn("the lost slot was made anew by something other than a heal (a relay with --on-slot-lost fail, setup, an operator): "+
		"healing over it, in a snapshot of its own; rows it also streams are published twice", slog.String("slot", r.target.Slot))
	r.warnHeal(cause)
	if err := backfill.RecordHealStart(ctx, conn, r.healSchema(), r.target.Slot, cause); err != nil {
		return nil, err
	}
	entry.bt = r.delivery.Backfill(true, true) // forced: at least once
	cfg.Force, cfg.BeforeCreate, cfg.Committed = true, nil, entry.bt.Committed()
	return backfill.Prepare(ctx, conn, cfg)
}
