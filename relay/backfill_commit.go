package relay

import (
	"context"

	"github.com/outbox-cdc/outbox-cdc/backfill"
)

// entry is e as the backfill feeds it: a backfill.Committer when the
// delivery mode commits the backfill's rows (Backfill.Committed), so that
// the feed commits every Config.CommitInterval and resumes from what the
// last commit holds.
func (e *backfillEntry) entry() backfill.Entry {
	if e.bt.Committed() != nil {
		return committingEntry{e}
	}
	return e
}

// committingEntry is the backfill's entry when its rows are committed: a
// backfill.Committer (and GapCleaner).
type committingEntry struct{ *backfillEntry }

// Commit has the delivery mode commit the rows handed over since the last
// commit, with progress; see backfill.Committer. A publish failure ends
// the wait for their acknowledgements at once.
func (c committingEntry) Commit(ctx context.Context, progress backfill.Progress) error {
	e := c.backfillEntry
	if e.pub == nil {
		return nil // nothing handed over since the last drain
	}
	if err := e.failed(); err != nil {
		return err
	}
	acked := func(ctx context.Context) error {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(e.failure, func() { cancel(context.Cause(e.failure)) })()
		return e.acks.track.WaitAcked(ctx)
	}
	err := e.bt.Commit(ctx, progress, acked)
	if ferr := e.failed(); err != nil && ferr != nil {
		return ferr // the publish failure, not the interrupted wait it caused
	}
	return err
}

// CleanCommitted cleans row (--cleanup) without publishing it: a commit
// holds its event already; see backfill.GapCleaner. The rule that keeps a
// row its dead letter may lack the value of is the stream's
// (outlet.cleanOnly).
func (c committingEntry) CleanCommitted(ctx context.Context, row backfill.Row) error {
	e := c.backfillEntry
	if e.pub == nil {
		if err := e.open(ctx); err != nil {
			return err
		}
	}
	pe := &pendingEvent{ev: row.Event, invalid: row.Invalid}
	if e.out.clean == nil || pe.row() == nil {
		return nil // nothing to clean, or nothing to clean it by
	}
	if err := e.out.reserve(ctx, pe); err != nil {
		return err
	}
	e.out.cleanOnly(pe)
	return nil
}
