package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// A backfill publishes the rows a polling relay left pending (those
// matching --backfill-where) before the slot streams: read in the slot's
// exported snapshot, they are exactly the rows committed before the slot's
// consistent point, and the slot streams exactly those committed after.
// Progress is kept in backfill.BackfillTable, with the snapshot the
// backfill began in, so that a backfill cut short resumes on restart
// reading exactly the rows that snapshot saw (in a snapshot of its own,
// keeping only rows whose inserting transaction is visible in the first),
// and one that finished is not run again.

// backfillJob is one table to backfill.
type backfillJob struct {
	table decode.Table
	where backfill.Predicate
	order backfill.Order // as configured; resolved when the backfill begins
	state backfill.BackfillState
}

// backfilled reports whether some table has a --backfill-where.
func (r *Relay) backfilled() bool {
	for _, t := range r.cfg.Tables {
		if t.BackfillWhere != "" {
			return true
		}
	}
	return false
}

// prepareBackfilled is prepare for a relay with --backfill-where: it
// creates the slot exporting its snapshot when there is none, runs what
// backfill is due, and returns where streaming starts.
func (r *Relay) prepareBackfilled(ctx context.Context) (pglogrepl.LSN, error) {
	cfg, log := r.cfg, r.log
	conn, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	if err := slot.PrepareTables(ctx, conn, r.target); err != nil {
		return 0, err
	}
	var jobs []backfillJob
	for i, tc := range cfg.Tables {
		if tc.BackfillWhere == "" {
			continue
		}
		where, err := backfill.CheckPredicate(ctx, conn, r.target.Tables[i], tc.BackfillWhere)
		if err != nil {
			return 0, err
		}
		order, err := backfill.ParseOrder(tc.BackfillOrder)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %w", slot.ErrNotReady, r.target.Tables[i].Qualified(), err)
		}
		jobs = append(jobs, backfillJob{table: r.target.Tables[i], where: where, order: order})
	}
	store, err := backfill.OpenBackfillStore(ctx, cfg.PostgresURL, cfg.Tables[0].Schema, cfg.Slot) // where status looks
	if err != nil {
		return 0, err
	}
	defer store.Close()
	// One instance backfills; another waits here, then finds it done.
	if err := store.Lock(ctx); err != nil {
		return 0, err
	}
	states, err := store.Load(ctx)
	if err != nil {
		return 0, err
	}
	if err := unfinishedElsewhere(ctx, conn, cfg.Slot, jobs, states); err != nil {
		return 0, err
	}
	exists, err := slot.SlotExists(ctx, conn, cfg.Slot)
	if err != nil {
		return 0, err
	}
	var exported *backfill.Exported
	var due []backfillJob
	if !exists || cfg.BackfillForce {
		// The order is chosen before a slot pins WAL: a table whose order
		// cannot follow commit order is refused here.
		for i := range jobs {
			if jobs[i].order, err = backfill.ChooseOrder(ctx, conn, jobs[i].table, jobs[i].order); err != nil {
				return 0, err
			}
		}
	}
	if !exists {
		// Recorded before the slot exists: a crash from here on finds the
		// backfill unfinished, and finishes it.
		for _, j := range jobs {
			if err := store.Save(ctx, backfill.BackfillState{Table: j.table.Qualified(), Phase: backfill.BackfillPending}); err != nil {
				return 0, err
			}
		}
		failover, err := slot.WantFailover(ctx, conn, r.target)
		if err != nil {
			return 0, err
		}
		if exported, err = backfill.CreateSlotExporting(ctx, cfg.PostgresURL, cfg.Slot, failover); err != nil {
			return 0, err
		}
		defer exported.Close()
		log.Info("created the slot, exporting its snapshot for the backfill", slog.String("slot", cfg.Slot),
			slog.String("consistent_point", exported.ConsistentPoint.String()))
		for _, j := range jobs {
			j.state = backfill.BackfillState{Table: j.table.Qualified(), Phase: backfill.BackfillRunning,
				ConsistentPoint: exported.ConsistentPoint, Order: j.order}
			due = append(due, j)
		}
	} else {
		for _, j := range jobs {
			st, ok := states[j.table.Qualified()]
			switch {
			case cfg.BackfillForce:
				log.Warn("--backfill-force: backfilling again on an existing slot; rows it also streams are published twice",
					slog.String("table", j.table.Qualified()), slog.String("where", j.where.String()))
				j.state = backfill.BackfillState{Table: j.table.Qualified(), Phase: backfill.BackfillRunning,
					ConsistentPoint: st.ConsistentPoint, Order: j.order}
				due = append(due, j)
			case !ok:
				log.Info("--backfill-where: the slot exists and no backfill of it is recorded, so none runs (--backfill-force runs one)",
					slog.String("table", j.table.Qualified()), slog.String("slot", cfg.Slot))
			case st.Phase == backfill.BackfillDone:
				log.Info("--backfill-where: the backfill was done before; nothing to do", slog.String("table", j.table.Qualified()),
					slog.Int64("rows", st.Done), slog.Time("finished", st.Updated))
			default:
				j.state, err = r.resumed(ctx, conn, j, st)
				if err != nil {
					return 0, err
				}
				due = append(due, j)
			}
		}
	}
	if len(due) > 0 {
		snapshot := ""
		if exported != nil {
			snapshot = exported.Snapshot
		}
		snap, err := backfill.OpenSnapshot(ctx, cfg.PostgresURL, snapshot)
		if err != nil {
			return 0, err
		}
		defer snap.Close()
		if exported != nil {
			exported.Close() // the reading transaction holds the snapshot now
			current, err := snap.Current(ctx)
			if err != nil {
				return 0, err
			}
			for i := range due { // recorded at once: a resume reads what this snapshot saw
				due[i].state.Snapshot = current
				if err := store.Save(ctx, due[i].state); err != nil {
					return 0, err
				}
			}
		}
		r.live.backfilling.Store(true)
		defer r.live.backfilling.Store(false)
		for _, j := range due {
			if err := r.backfillTable(ctx, snap, store, j, exported != nil); err != nil || ctx.Err() != nil {
				return 0, err
			}
		}
	}
	return slot.Prepare(ctx, conn, r.target, false)
}

// resumed is the state a backfill cut short resumes from. A record of an
// earlier version has no order (it ordered by the timestamp column when
// the table had one) and no snapshot (rows committed since the slot was
// created are then read too, and published twice).
func (r *Relay) resumed(ctx context.Context, conn *pgx.Conn, j backfillJob, st backfill.BackfillState) (backfill.BackfillState, error) {
	st.Phase = backfill.BackfillRunning
	if st.Order == "" && st.After == nil { // cut short before its first row
		order, err := backfill.ChooseOrder(ctx, conn, j.table, j.order)
		if err != nil {
			return st, err
		}
		st.Order = order
	}
	if st.Order == "" {
		legacy := backfill.OrderID
		if len(st.After.Values) == 2 {
			if _, err := backfill.ChooseOrder(ctx, conn, j.table, backfill.OrderTimestamp); err == nil {
				legacy = backfill.OrderTimestamp
			}
		}
		st.Order = legacy
		switch {
		case st.After != nil && legacy == backfill.OrderID: // [id]
			st.After = &backfill.Key{Values: st.After.Values[1:]}
		case st.After != nil: // [timestamp, statement unknown: rows of the same time again, id]
			st.After = &backfill.Key{Values: []*string{st.After.Values[0], nil, st.After.Values[1]}}
		}
	}
	if st.Last == nil {
		r.log.Warn("resuming a backfill whose first snapshot's extent was not recorded (cut short before its first row, or recorded by an earlier version), in a snapshot of its own: rows committed since the slot was created may be published twice",
			slog.String("table", j.table.Qualified()), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
	} else {
		r.log.Info("resuming a backfill cut short, up to the last row its first snapshot saw",
			slog.String("table", j.table.Qualified()), slog.Int64("done", st.Done), slog.Int64("total", st.Total),
			slog.String("order", string(st.Order)))
	}
	return st, nil
}

// backfillTable publishes j's rows in snap, in order, and records its
// progress: the last row acknowledged with every one before it. inExported
// says snap is the snapshot the backfill began in, whose last row is
// recorded; otherwise the read stops at that row: what sorts after it
// committed after the slot, which streams it. (A row of that snapshot
// updated since still sorts where it did, unlike a test on its xmin.)
func (r *Relay) backfillTable(ctx context.Context, snap *backfill.Snapshot, store *backfill.BackfillStore, j backfillJob, inExported bool) error {
	st := j.state
	read := &backfill.Read{Table: j.table, Where: j.where, Order: st.Order, After: st.After}
	if inExported {
		last, err := snap.Last(ctx, read)
		if err != nil {
			return err
		}
		st.Last = last
	} else {
		read.Until = st.Last
	}
	remaining, err := snap.Count(ctx, read)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" { // the count's timeout: the total stays unknown
		r.log.Warn("counting the rows to backfill took too long; going on without a total", slog.String("table", j.table.Qualified()))
		remaining, err = -1, snap.NoTimeout(ctx)
	}
	if err != nil {
		return err
	}
	if (st.Total == 0 || st.After == nil) && remaining >= 0 {
		st.Total = remaining
	}
	if err := store.Save(ctx, st); err != nil {
		return err
	}
	r.log.Info("backfilling", slog.String("table", j.table.Qualified()), slog.String("where", j.where.String()),
		slog.String("order", string(st.Order)), slog.Int64("rows", remaining))
	f, err := r.newFeed(ctx, store, st)
	if err != nil {
		return err
	}
	// A publish failure ends the read at once, even while it waits for
	// room in the window: the window never frees past a failed event.
	readCtx, stopReading := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case err := <-f.pub.failed:
			stopReading(err)
		case <-readCtx.Done():
		}
	}()
	readErr := snap.Rows(readCtx, read, func(rel *pglogrepl.RelationMessage, values [][]byte, key backfill.Key) error {
		return f.row(readCtx, rel, values, key)
	})
	stopReading(nil)
	<-watched
	if cause := context.Cause(readCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		readErr = cause // the publish failure, not the interrupted read it caused
	}
	return f.finish(ctx, readErr)
}

// unfinishedElsewhere refuses to go on when a backfill of the slot was cut
// short on a table that no longer has its recorded name (renamed since):
// under its new name no record would be found, and no backfill would run,
// leaving the rest of its rows to no one.
func unfinishedElsewhere(ctx context.Context, conn *pgx.Conn, slotName string, jobs []backfillJob, states map[string]backfill.BackfillState) error {
	for _, st := range states {
		if st.Phase == backfill.BackfillDone || slices.ContainsFunc(jobs, func(j backfillJob) bool { return j.table.Qualified() == st.Table }) {
			continue
		}
		schema, name, _ := strings.Cut(st.Table, ".")
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, name}.Sanitize()).Scan(&exists); err != nil {
			return fmt.Errorf("look up %s: %w", st.Table, err)
		}
		if !exists {
			return fmt.Errorf("%w: the backfill of %s on slot %q was cut short (%d of %d rows) and no table has that name now (renamed?); "+
				"name the table as recorded, or move the record to its new name: UPDATE %s SET outbox_table = 'SCHEMA.NEW_NAME' WHERE slot = '%s' AND outbox_table = '%s'",
				slot.ErrNotReady, st.Table, slotName, st.Done, st.Total, backfill.BackfillTable, slotName, st.Table)
		}
	}
	return nil
}
