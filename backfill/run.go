package backfill

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// Run publishes the due tables' rows through entry, one table after
// another, each drained before the next; it returns nil once all are done,
// or when ctx ends (a restart resumes). In the exported snapshot when
// Prepare created the slot (its extent recorded first, for a resume);
// otherwise in a snapshot of its own, up to the last row the first one saw.
func (p *Plan) Run(ctx context.Context, entry Entry) error {
	if len(p.due) == 0 {
		return nil
	}
	snapshot := ""
	if p.exported != nil {
		snapshot = p.exported.Snapshot
	}
	snap, err := OpenSnapshot(ctx, p.cfg.URL, snapshot)
	if err != nil {
		return err
	}
	defer snap.Close()
	if p.exported != nil {
		p.exported.Close() // the reading transaction holds the snapshot now
		current, err := snap.Current(ctx)
		if err != nil {
			return err
		}
		// Recorded at once, for every table: a resume reads what this
		// snapshot saw, also of the tables it had not reached (read in a
		// snapshot of their own to the end, they would publish rows the
		// slot streams as well).
		for i := range p.due {
			j := &p.due[i]
			last, err := snap.Last(ctx, &Read{Table: j.table, Where: j.where, Order: j.state.Order})
			if err != nil {
				return err
			}
			j.state.Snapshot, j.state.Last = current, last
			if last == nil { // no row to backfill: done, or a resume would read rows the slot streams
				j.state.Phase = PhaseDone
			}
			if err := p.store.Save(ctx, j.state); err != nil {
				return err
			}
		}
	}
	for _, j := range p.due {
		if err := p.cleanGap(ctx, snap, j, entry); err != nil || ctx.Err() != nil {
			return err
		}
		if err := p.table(ctx, snap, j, entry); err != nil || ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// table publishes j's rows in snap, in order, and records its progress:
// the last row acknowledged with every one before it. Outside the
// exported snapshot, the read stops at the last row that snapshot saw:
// what sorts after it committed after the slot, which streams it. (A row
// of that snapshot updated since still sorts where it did, unlike a test
// on its xmin.)
func (p *Plan) table(ctx context.Context, snap *Snapshot, j job, entry Entry) error {
	st := j.state
	// At least once, a resume re-reads the rest of its last row's
	// transaction (Read.Loose); exactly once, the commit says which rows
	// Kafka holds, and no row of it may be read again.
	read := &Read{Table: j.table, Where: j.where, Order: st.Order, After: st.After, Loose: p.cfg.Committed == nil}
	if p.exported == nil { // in the exported snapshot, its last row is recorded (Run)
		read.Until = st.Last
	}
	remaining, err := p.count(ctx, snap, read)
	if err != nil {
		return err
	}
	if (st.Total == 0 || st.After == nil) && remaining >= 0 {
		st.Total = remaining
	}
	if err := p.store.Save(ctx, st); err != nil {
		return err
	}
	p.log.Info("backfilling", slog.String("table", j.table.Qualified()), slog.String("where", j.where.String()),
		slog.String("order", string(st.Order)), slog.Int64("rows", remaining))
	f := p.newFeed(st, entry)
	commitsCtx, commitFailed := context.WithCancelCause(ctx)
	defer commitFailed(nil)
	stopCommits := f.startCommits(ctx, commitFailed)
	readErr := readUntilFailure(commitsCtx, entry.Failure(), func(readCtx context.Context) error {
		return snap.Rows(readCtx, read, func(rel *pglogrepl.RelationMessage, values [][]byte, key Key) error {
			return f.row(readCtx, rel, values, key)
		})
	})
	stopCommits()
	if cause := context.Cause(commitsCtx); ctx.Err() == nil && commitsCtx.Err() != nil {
		readErr = cause // a commit failed: the read was cut short for it
	}
	return f.finish(ctx, readErr)
}

// readUntilFailure runs read under a context that ends with ctx or at the
// first publish failure (failure, Entry.Failure), whichever comes first. A
// failure must end the read at once, even one waiting on the server for its
// next row (a sparse predicate over a large table): the window never frees
// past a failed row, and the rest of the result set would be read for
// nothing. A read cut short by the failure returns nil: the drain reports
// the failure itself.
func readUntilFailure(ctx, failure context.Context, read func(context.Context) error) error {
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	defer context.AfterFunc(failure, stopReading)()
	err := read(readCtx)
	if ctx.Err() == nil && failure.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// count counts read's rows; -1 when counting took too long (the total
// stays unknown, and the read goes on without the count's timeout).
func (p *Plan) count(ctx context.Context, snap *Snapshot, read *Read) (int64, error) {
	remaining, err := snap.Count(ctx, read)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" { // the count's timeout
		p.log.Warn("counting the rows to backfill took too long; going on without a total", slog.String("table", read.Table.Qualified()))
		remaining, err = -1, snap.NoTimeout(ctx)
	}
	return remaining, err
}
