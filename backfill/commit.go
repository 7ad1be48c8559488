package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Progress is how far a backfill of one table got, as a commit records it.
type Progress struct {
	Table string // schema.table
	// ConsistentPoint and Snapshot name the backfill (State's).
	ConsistentPoint pglogrepl.LSN
	Snapshot        string
	Done            int64 // rows committed, in read order
	After           *Key  // the last of them; nil before the first
	Finished        bool  // every row of the table is committed
}

// Committer is an Entry whose rows become readable only when committed
// (exactly-once: a Kafka transaction), with the progress in the same
// commit, so that a resume skips exactly the rows committed
// (Config.Committed). The feed then commits every Config.CommitInterval
// instead of recording acknowledgements, and records progress in the
// progress table only after each commit: the table may lag the commit,
// never lead it.
type Committer interface {
	Entry
	// Commit waits for every row handed over since the last commit to be
	// acknowledged, and commits them with progress; a failure leaves them
	// uncommitted (Drain then ends the entry's transaction). With nothing
	// handed over since, it commits progress alone, or nothing.
	Commit(ctx context.Context, progress Progress) error
}

// GapCleaner is a Committer whose commits clean the rows they hold
// (--cleanup). A crash between a commit and its recording in the progress
// table may leave rows in Kafka but not cleaned; a resume, past them, has
// the entry clean them without publishing them again (Config.CleanGap).
type GapCleaner interface {
	Committer
	// CleanCommitted cleans row, whose event a commit holds already; Drain
	// waits until it is clean.
	CleanCommitted(ctx context.Context, row Row) error
}

// gap is the rows a commit holds that the progress table does not
// record: after from, up to and with until.
type gap struct{ from, until *Key }

// committed brings st, a backfill cut short, to what the last commit
// (Config.Committed) says of it: the progress table lags the commit after
// a crash between the two. It reports whether that commit finished the
// table (then recorded done here). Progress of another table or another
// backfill of this one (another consistent point) says nothing of st; so
// does progress behind the table's, recorded since by a run in
// at-least-once.
//
// With Config.CleanGap, rows the commit holds past the table's progress
// may not be cleaned: j keeps them as its gap, and a finished table stays
// due until they are.
func (p *Plan) committed(ctx context.Context, j *job, st State) (State, bool, error) {
	if p.cfg.Committed == nil {
		return st, false, nil
	}
	if !p.asked { // once, under the lock: no other instance commits meanwhile
		var err error
		if p.last, err = p.cfg.Committed(ctx); err != nil {
			return st, false, err
		}
		p.asked = true
	}
	c := p.last
	if c == nil || c.Table != st.Table || c.ConsistentPoint != st.ConsistentPoint || c.Snapshot != st.Snapshot || c.Done < st.Done ||
		(c.Done == st.Done && !c.Finished) {
		return st, false, nil
	}
	p.log.Info("the backfill's last kafka commit is past its recorded progress (a crash between the two): resuming from the commit",
		slog.String("table", st.Table), slog.Int64("recorded", st.Done), slog.Int64("committed", c.Done), slog.Bool("finished", c.Finished))
	if p.cfg.CleanGap && c.Done > st.Done {
		j.gap = &gap{from: st.After, until: c.After}
	}
	st.Done, st.After = c.Done, c.After
	if !c.Finished || j.gap != nil {
		return st, false, nil
	}
	st.Phase = PhaseDone
	if err := p.store.Save(ctx, st); err != nil {
		return st, false, err
	}
	return st, true, nil
}

// cleanGap has entry clean j's gap (see GapCleaner), read in snap.
func (p *Plan) cleanGap(ctx context.Context, snap *Snapshot, j job, entry Entry) error {
	cleaner, ok := entry.(GapCleaner)
	if j.gap == nil || !ok {
		return nil
	}
	p.log.Info("cleaning the rows the last kafka commit holds, which a crash left uncleaned", slog.String("table", j.table.Qualified()))
	dec := decode.New(p.cfg.Target.Tables...)
	var rows *decode.RowDecoder
	read := &Read{Table: j.table, Where: j.where, Order: j.state.Order, After: j.gap.from, Until: j.gap.until}
	n := 0
	err := readUntilFailure(ctx, entry.Failure(), func(readCtx context.Context) error {
		return snap.Rows(readCtx, read, func(rel *pglogrepl.RelationMessage, values [][]byte, _ Key) error {
			if rows == nil {
				rows = dec.Rows(rel)
			}
			row, err := decodeRow(rows, values, j.state.ConsistentPoint, time.Now())
			if err != nil {
				return err
			}
			n++
			return cleaner.CleanCommitted(readCtx, row)
		})
	})
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.DrainTimeout)
	defer cancel()
	err = errors.Join(err, entry.Drain(drainCtx))
	if ctx.Err() != nil {
		return nil // a restart cleans them again
	}
	if err != nil {
		return fmt.Errorf("backfill of %s: clean the rows the last kafka commit holds: %w", j.table.Qualified(), err)
	}
	p.log.Info("cleaned the rows the last kafka commit holds", slog.String("table", j.table.Qualified()), slog.Int("rows", n))
	return nil
}
