package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// A backfill publishes the rows a polling relay left pending (those
// matching --backfill-where) before the slot streams: read in the slot's
// exported snapshot, they are exactly the rows committed before the slot's
// consistent point, and the slot streams exactly those committed after.
// Progress is kept in replication.BackfillTable, so that a backfill cut
// short resumes on restart (in a snapshot of its own: rows committed after
// the slot may then be published twice, never lost) and one that finished
// is not run again.

// backfillJob is one table to backfill.
type backfillJob struct {
	table decode.Table
	where string
	state replication.BackfillState
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
	if err := replication.PrepareTables(ctx, conn, r.target); err != nil {
		return 0, err
	}
	var jobs []backfillJob
	for i, tc := range cfg.Tables {
		if tc.BackfillWhere == "" {
			continue
		}
		if err := replication.CheckPredicate(ctx, conn, r.target.Tables[i], tc.BackfillWhere); err != nil {
			return 0, err
		}
		jobs = append(jobs, backfillJob{table: r.target.Tables[i], where: tc.BackfillWhere})
	}
	store, err := replication.OpenBackfillStore(ctx, cfg.PostgresURL, cfg.Tables[0].Schema, cfg.Slot) // where status looks
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
	exists, err := replication.SlotExists(ctx, conn, cfg.Slot)
	if err != nil {
		return 0, err
	}
	var exported *replication.Exported
	var due []backfillJob
	if !exists {
		// Recorded before the slot exists: a crash from here on finds the
		// backfill unfinished, and finishes it.
		for _, j := range jobs {
			if err := store.Save(ctx, replication.BackfillState{Table: j.table.Qualified(), Phase: replication.BackfillPending}); err != nil {
				return 0, err
			}
		}
		failover, err := replication.WantFailover(ctx, conn, r.target)
		if err != nil {
			return 0, err
		}
		if exported, err = replication.CreateSlotExporting(ctx, cfg.PostgresURL, cfg.Slot, failover); err != nil {
			return 0, err
		}
		defer exported.Close()
		log.Info("created the slot, exporting its snapshot for the backfill", slog.String("slot", cfg.Slot),
			slog.String("consistent_point", exported.ConsistentPoint.String()))
		for _, j := range jobs {
			j.state = replication.BackfillState{Table: j.table.Qualified(), Phase: replication.BackfillRunning, ConsistentPoint: exported.ConsistentPoint}
			due = append(due, j)
		}
	} else {
		for _, j := range jobs {
			st, ok := states[j.table.Qualified()]
			switch {
			case cfg.BackfillForce:
				log.Warn("--backfill-force: backfilling again on an existing slot; rows it also streams are published twice",
					slog.String("table", j.table.Qualified()), slog.String("where", j.where))
				j.state = replication.BackfillState{Table: j.table.Qualified(), Phase: replication.BackfillRunning, ConsistentPoint: st.ConsistentPoint}
				due = append(due, j)
			case !ok:
				log.Info("--backfill-where: the slot exists and no backfill of it is recorded, so none runs (--backfill-force runs one)",
					slog.String("table", j.table.Qualified()), slog.String("slot", cfg.Slot))
			case st.Phase == replication.BackfillDone:
				log.Info("--backfill-where: the backfill was done before; nothing to do", slog.String("table", j.table.Qualified()),
					slog.Int64("rows", st.Done), slog.Time("finished", st.Updated))
			default:
				log.Warn("resuming a backfill cut short, in a snapshot of its own: rows committed since the slot was created may be published twice",
					slog.String("table", j.table.Qualified()), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
				j.state = st
				j.state.Phase = replication.BackfillRunning
				due = append(due, j)
			}
		}
	}
	if len(due) > 0 {
		snapshot := ""
		if exported != nil {
			snapshot = exported.Snapshot
		}
		snap, err := replication.OpenSnapshot(ctx, cfg.PostgresURL, snapshot)
		if err != nil {
			return 0, err
		}
		defer snap.Close()
		if exported != nil {
			exported.Close() // the reading transaction holds the snapshot now
		}
		r.live.backfilling.Store(true)
		defer r.live.backfilling.Store(false)
		for _, j := range due {
			if err := r.backfillTable(ctx, snap, store, j); err != nil || ctx.Err() != nil {
				return 0, err
			}
		}
	}
	return replication.Prepare(ctx, conn, r.target, false)
}

// backfillTable publishes j's rows in snap, in order, and records its
// progress: the last row acknowledged with every one before it.
func (r *Relay) backfillTable(ctx context.Context, snap *replication.Snapshot, store *replication.BackfillStore, j backfillJob) error {
	cfg, log := r.cfg, r.log
	st := j.state
	remaining, err := snap.Count(ctx, j.table, j.where)
	if err != nil {
		return err
	}
	if st.Total == 0 || st.After == nil {
		st.Total = remaining
	}
	if err := store.Save(ctx, st); err != nil {
		return err
	}
	log.Info("backfilling", slog.String("table", j.table.Qualified()), slog.String("where", j.where), slog.Int64("rows", remaining))

	// Each row is a transaction of its own, ending at a position that
	// counts rows: the tracker's confirmed position says how many are
	// acknowledged, every one before them too.
	const base = pglogrepl.LSN(1)
	track := checkpoint.New(base, cfg.MaxInFlight, cfg.MaxInFlightBytes)
	pub, err := r.newPublisher(ctx, track)
	if err != nil {
		return err
	}
	dec := decode.New(r.target.Tables...)
	p := &pipeline{track: track, pub: pub.writer, clean: pub.cleaner}
	keys := map[uint64]replication.Key{} // of rows handed over and not yet recorded
	var handed, recorded uint64
	startDone, began := st.Done, time.Now()
	record := func(ctx context.Context) error {
		acked := uint64(track.Confirmed() - base)
		if acked == recorded {
			return nil
		}
		k := keys[acked-1]
		for i := recorded; i < acked; i++ {
			delete(keys, i)
		}
		recorded = acked
		st.Done, st.After = startDone+int64(acked), &k
		r.metrics.Backfill(st.Table, st.Total, st.Done)
		return store.Save(ctx, st)
	}
	at := time.Now()
	var rows *decode.RowDecoder
	lastLog := time.Now()
	readErr := snap.Rows(ctx, j.table, j.where, j.state.After, func(rel *pglogrepl.RelationMessage, values [][]byte, key replication.Key) error {
		select {
		case err := <-pub.failed:
			return err
		default:
		}
		if rows == nil {
			rows = dec.Rows(rel)
		}
		track.Begin()
		ev, err := rows.Event(values, st.ConsistentPoint, at)
		var rowErr *decode.InvalidRowError
		switch {
		case errors.As(err, &rowErr):
			p.pending = &pendingEvent{invalid: rowErr}
		case err != nil:
			return err
		default:
			p.pending = &pendingEvent{ev: ev}
		}
		if err := p.hand(ctx); err != nil {
			return err
		}
		keys[handed] = key
		handed++
		track.Commit(base + pglogrepl.LSN(handed))
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			if err := record(ctx); err != nil {
				return err
			}
			log.Info("backfill progress", slog.String("table", st.Table), slog.Int64("done", st.Done), slog.Int64("total", st.Total),
				slog.Float64("rows_per_second", float64(st.Done-startDone)/time.Since(began).Seconds()))
		}
		return nil
	})
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	closeErr := pub.close(drainCtx)
	if err := record(drainCtx); err != nil {
		closeErr = errors.Join(closeErr, err)
	}
	if ctx.Err() != nil {
		log.Info("backfill stopped; a restart resumes it", slog.String("table", st.Table), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
		return nil
	}
	if readErr != nil || closeErr != nil || recorded != handed {
		return fmt.Errorf("backfill of %s: %d of %d rows acknowledged: %w", st.Table, recorded, handed, errors.Join(readErr, closeErr))
	}
	st.Phase = replication.BackfillDone
	if err := store.Save(drainCtx, st); err != nil {
		return err
	}
	log.Info("backfill done", slog.String("table", st.Table), slog.Int64("rows", st.Done-startDone),
		slog.Duration("took", time.Since(began).Round(time.Millisecond)))
	return nil
}
