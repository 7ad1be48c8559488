package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// startCommits commits every f.every, on a goroutine of its own while the
// read runs (with a Committer; otherwise row records as it goes): a read
// that waits long for its next row (a sparse predicate over a large
// table) must not keep a transaction open past its timeout. A commit is
// never cut short by ctx (a stop), only bounded by the Committer: a
// record written and not committed would leave the commit in doubt. A
// failed commit ends the read through fail. stop ends the commits, once
// the one under way returned.
func (f *feed) startCommits(ctx context.Context, fail context.CancelCauseFunc) (stop func()) {
	if f.commits == nil {
		return func() {}
	}
	done := make(chan struct{})
	var running sync.WaitGroup
	running.Go(func() {
		tick := time.NewTicker(f.every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			f.mu.Lock()
			err := f.commit(context.WithoutCancel(ctx), false)
			f.mu.Unlock()
			if err != nil {
				fail(err)
				return
			}
		}
	})
	return func() {
		close(done)
		running.Wait()
	}
}

// commit has the Committer commit every row handed over, with the
// progress they make (finished: the table's last), and then records it.
func (f *feed) commit(ctx context.Context, finished bool) error {
	if f.handed == f.recorded && !finished {
		return nil
	}
	after := f.st.After
	if f.handed > f.recorded {
		k := f.keys[f.handed-1]
		after = &k
	}
	progress := Progress{Table: f.st.Table, ConsistentPoint: f.st.ConsistentPoint, Snapshot: f.st.Snapshot,
		Done: f.startDone + int64(f.handed), After: after, Finished: finished}
	if err := f.commits.Commit(ctx, progress); err != nil {
		return err
	}
	if acked := f.acks.Acked(); acked < f.handed { // the Committer's promise, checked
		return fmt.Errorf("the entry committed with %d of %d rows acknowledged", acked, f.handed)
	}
	for i := f.recorded; i < f.handed; i++ {
		delete(f.keys, i)
	}
	f.recorded = f.handed
	f.st.Done, f.st.After = progress.Done, after
	if finished {
		f.st.Phase = PhaseDone
	}
	if f.onRec != nil {
		f.onRec(f.st.Table, f.st.Total, f.st.Done)
	}
	if err := f.store.Save(ctx, f.st); err != nil {
		return fmt.Errorf("committed %d rows, but not recorded (a resume takes the commit's progress): %w", f.st.Done, err)
	}
	return nil
}

// finishCommitted is finish with a Committer: every row read commits with
// the table finished, and a read stopped by ctx commits what it handed
// over (a restart resumes past it); after a failure nothing more commits,
// and Drain ends the transaction (those rows are read again).
func (f *feed) finishCommitted(ctx context.Context, readErr error) error {
	st := &f.st
	drainCtx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	stopped := ctx.Err() != nil
	var commitErr error
	if readErr == nil || stopped {
		commitErr = f.commit(drainCtx, !stopped)
	}
	drainErr := f.entry.Drain(drainCtx)
	if stopped {
		if commitErr != nil {
			f.log.Warn("backfill stopped, and its last commit failed: a restart resumes from what kafka holds", slog.String("table", st.Table), slog.Any("err", commitErr))
		}
		f.log.Info("backfill stopped; a restart resumes it", slog.String("table", st.Table), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
		return nil
	}
	if err := errors.Join(readErr, commitErr, drainErr); err != nil {
		return fmt.Errorf("backfill of %s: %d of %d rows committed and recorded: %w", st.Table, f.recorded, f.handed, err)
	}
	f.log.Info("backfill done", slog.String("table", st.Table), slog.Int64("rows", st.Done-f.startDone),
		slog.Duration("took", time.Since(f.began).Round(time.Millisecond)))
	return nil
}
