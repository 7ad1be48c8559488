package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
)

// feed hands one table's backfilled rows to a publisher of its own and
// records how far the acknowledgements reached.
//
// Each row is a transaction of its own, ending at a position that counts
// rows: the tracker's confirmed position says how many are acknowledged,
// every one before them too.
type feed struct {
	r     *Relay
	store *backfill.BackfillStore
	st    backfill.BackfillState
	track *checkpoint.Tracker
	pub   *publisher
	p     *pipeline
	dec   *decode.Decoder
	rows  *decode.RowDecoder

	keys                     map[uint64]backfill.Key // of rows handed over and not yet recorded
	handed, recorded         uint64
	startDone                int64
	began, at, logged, saved time.Time
}

// feedBase is the tracker's position before the first row.
const feedBase = pglogrepl.LSN(1)

func (r *Relay) newFeed(ctx context.Context, store *backfill.BackfillStore, st backfill.BackfillState) (*feed, error) {
	track := checkpoint.New(feedBase, r.cfg.MaxInFlight, r.cfg.MaxInFlightBytes)
	pub, err := r.newPublisher(ctx, track, nil)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &feed{
		r: r, store: store, st: st, track: track, pub: pub,
		p:    &pipeline{track: track, pub: pub.writer, clean: pub.cleaner},
		dec:  decode.New(r.target.Tables...),
		keys: map[uint64]backfill.Key{}, startDone: st.Done, began: now, at: now, logged: now, saved: now,
	}, nil
}

// row hands one row over (a row that does not decode, to the dead-letter
// topic), and every few seconds records progress.
func (f *feed) row(ctx context.Context, rel *pglogrepl.RelationMessage, values [][]byte, key backfill.Key) error {
	if f.rows == nil {
		f.rows = f.dec.Rows(rel)
	}
	f.track.Begin()
	ev, err := f.rows.Event(values, f.st.ConsistentPoint, f.at)
	var rowErr *decode.InvalidRowError
	switch {
	case errors.As(err, &rowErr):
		f.p.pending = &pendingEvent{invalid: rowErr}
	case err != nil:
		return err
	default:
		f.p.pending = &pendingEvent{ev: ev}
	}
	if err := f.p.hand(ctx); err != nil {
		return err
	}
	f.keys[f.handed] = key
	f.handed++
	f.track.Commit(feedBase + pglogrepl.LSN(f.handed))
	// Progress is recorded as often as the stream confirms: after a crash
	// only rows acknowledged since are published again.
	if time.Since(f.saved) < max(f.r.cfg.ConfirmInterval, 10*time.Millisecond) {
		return nil
	}
	f.saved = time.Now()
	if err := f.record(ctx); err != nil {
		return err
	}
	if time.Since(f.logged) < 5*time.Second {
		return nil
	}
	f.logged = time.Now()
	f.r.log.Info("backfill progress", slog.String("table", f.st.Table), slog.Int64("done", f.st.Done), slog.Int64("total", f.st.Total),
		slog.Float64("rows_per_second", float64(f.st.Done-f.startDone)/time.Since(f.began).Seconds()))
	return nil
}

// record saves the key of the last row acknowledged with all before it.
func (f *feed) record(ctx context.Context) error {
	acked := uint64(f.track.Confirmed() - feedBase)
	if acked == f.recorded {
		return nil
	}
	k := f.keys[acked-1]
	for i := f.recorded; i < acked; i++ {
		delete(f.keys, i)
	}
	f.recorded = acked
	f.st.Done, f.st.After = f.startDone+int64(acked), &k
	f.r.metrics.Backfill(f.st.Table, f.st.Total, f.st.Done)
	return f.store.Save(ctx, f.st)
}

// finish drains the publisher, records how far it got, and marks the
// backfill done when every row was read and acknowledged. Stopped by a
// signal it returns nil: a restart resumes.
func (f *feed) finish(ctx context.Context, readErr error) error {
	st := &f.st
	drainCtx, cancel := context.WithTimeout(context.Background(), f.r.cfg.DrainTimeout)
	defer cancel()
	closeErr := f.pub.close(drainCtx)
	if err := f.record(drainCtx); err != nil {
		closeErr = errors.Join(closeErr, err)
	}
	if ctx.Err() != nil {
		f.r.log.Info("backfill stopped; a restart resumes it", slog.String("table", st.Table), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
		return nil
	}
	if readErr != nil || closeErr != nil || f.recorded != f.handed {
		return fmt.Errorf("backfill of %s: %d of %d rows acknowledged: %w", st.Table, f.recorded, f.handed, errors.Join(readErr, closeErr))
	}
	st.Phase = backfill.BackfillDone
	if err := f.store.Save(drainCtx, *st); err != nil {
		return err
	}
	f.r.log.Info("backfill done", slog.String("table", st.Table), slog.Int64("rows", st.Done-f.startDone),
		slog.Duration("took", time.Since(f.began).Round(time.Millisecond)))
	return nil
}
