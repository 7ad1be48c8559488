package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// saver records a backfill's state (Store.Save).
type saver interface {
	Save(ctx context.Context, st State) error
}

// feed hands one table's rows to the pipeline's entry and records how far
// Kafka's acknowledgements reached: rows are numbered as they are handed
// over, and the recorded key is that of the last row acknowledged with
// every one before it.
type feed struct {
	entry Entry
	// commits is entry when it is a Committer: progress is then what it
	// committed, recorded after each commit (see Committer), and mu guards
	// what follows between the read and the commits (startCommits).
	commits Committer
	mu      sync.Mutex
	store   saver
	log     *slog.Logger
	st      State
	every   time.Duration // how often progress is recorded
	drain   time.Duration // the drain's bound
	onRec   func(table string, total, done int64)
	dec     *decode.Decoder
	rows    *decode.RowDecoder

	acks                 Counter
	keys                 map[uint64]Key // of rows handed over and not yet recorded
	handed, recorded     uint64
	startDone            int64
	began, logged, saved time.Time
}

func (p *Plan) newFeed(st State, entry Entry) *feed {
	now := time.Now()
	f := &feed{
		entry: entry, store: p.store, log: p.log, st: st,
		// As often as the stream confirms: after a crash only rows
		// acknowledged since are published again.
		every: max(p.cfg.ConfirmInterval, 10*time.Millisecond), drain: p.cfg.DrainTimeout, onRec: p.cfg.Progress,
		dec:  decode.New(p.cfg.Target.Tables...),
		keys: map[uint64]Key{}, startDone: st.Done, began: now, logged: now, saved: now,
	}
	if c, ok := entry.(Committer); ok {
		f.commits, f.every = c, max(p.cfg.CommitInterval, 10*time.Millisecond)
	}
	return f
}

// decodeRow decodes a backfilled row's values as of point: an event, or
// why the row does not decode (it is dead-lettered); an error that is not
// the row's own stops the backfill.
func decodeRow(rows *decode.RowDecoder, values [][]byte, point pglogrepl.LSN, at time.Time) (Row, error) {
	ev, err := rows.Event(values, point, at)
	var rowErr *decode.InvalidRowError
	switch {
	case errors.As(err, &rowErr):
		return Row{Invalid: rowErr}, nil
	case err != nil:
		return Row{}, err
	}
	return Row{Event: ev}, nil
}

// row hands one row over (a row that does not decode, to be dead-lettered),
// and every few milliseconds records progress.
func (f *feed) row(ctx context.Context, rel *pglogrepl.RelationMessage, values [][]byte, key Key) error {
	if f.rows == nil {
		f.rows = f.dec.Rows(rel)
	}
	row, err := decodeRow(f.rows, values, f.st.ConsistentPoint, f.began)
	if err != nil {
		return err
	}
	if f.commits != nil { // shared with the commits (startCommits)
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	n := f.handed
	if err := f.entry.Publish(ctx, row, func() { f.acks.Ack(n) }); err != nil {
		return err
	}
	f.keys[n] = key
	f.handed++
	if f.commits == nil && time.Since(f.saved) >= f.every {
		f.saved = time.Now()
		if err := f.record(ctx); err != nil {
			return err
		}
	}
	if time.Since(f.logged) < 5*time.Second {
		return nil
	}
	f.logged = time.Now()
	f.log.Info("backfill progress", slog.String("table", f.st.Table), slog.Int64("done", f.st.Done), slog.Int64("total", f.st.Total),
		slog.Float64("rows_per_second", float64(f.st.Done-f.startDone)/time.Since(f.began).Seconds()))
	return nil
}

// record saves the key of the last row acknowledged with all before it;
// with a Committer, commits what was handed over and then saves it.
func (f *feed) record(ctx context.Context) error {
	if f.commits != nil {
		return f.commit(ctx, false)
	}
	// Only rows handed over count: one whose Publish failed has no key.
	acked := min(f.acks.Acked(), f.handed)
	if acked == f.recorded {
		return nil
	}
	k := f.keys[acked-1]
	for i := f.recorded; i < acked; i++ {
		delete(f.keys, i)
	}
	f.recorded = acked
	f.st.Done, f.st.After = f.startDone+int64(acked), &k
	if f.onRec != nil {
		f.onRec(f.st.Table, f.st.Total, f.st.Done)
	}
	return f.store.Save(ctx, f.st)
}

// errUnacknowledged is why a backfill is not done when neither the read
// nor the drain failed, yet rows handed over were never acknowledged.
var errUnacknowledged = errors.New("the entry drained without acknowledging every row")

// finish drains the entry, records how far it got, and marks the backfill
// done when every row was read and acknowledged. Stopped by ctx it returns
// nil: a restart resumes.
func (f *feed) finish(ctx context.Context, readErr error) error {
	if f.commits != nil {
		return f.finishCommitted(ctx, readErr)
	}
	st := &f.st
	drainCtx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	drainErr := f.entry.Drain(drainCtx)
	if err := f.record(drainCtx); err != nil {
		drainErr = errors.Join(drainErr, err)
	}
	if ctx.Err() != nil {
		f.log.Info("backfill stopped; a restart resumes it", slog.String("table", st.Table), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
		return nil
	}
	if readErr != nil || drainErr != nil || f.recorded != f.handed {
		cause := errors.Join(readErr, drainErr)
		if cause == nil {
			cause = errUnacknowledged
		}
		return fmt.Errorf("backfill of %s: %d of %d rows acknowledged: %w", st.Table, f.recorded, f.handed, cause)
	}
	st.Phase = PhaseDone
	if err := f.store.Save(drainCtx, *st); err != nil {
		return err
	}
	f.log.Info("backfill done", slog.String("table", st.Table), slog.Int64("rows", st.Done-f.startDone),
		slog.Duration("took", time.Since(f.began).Round(time.Millisecond)))
	return nil
}
