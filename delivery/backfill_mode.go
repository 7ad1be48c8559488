package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/outbox-cdc/outbox-cdc/backfill"
)

// The backfill's exactly-once, as the relay's backfill entry drives it
// (Backfill).

// Committed fences the slot's earlier instances and returns the
// backfill's progress in the last committed checkpoint; see
// backfill.Config.Committed. Nothing is asked of the servers before: that
// waits for the backfill's lock, and for a backfill to run.
func (bt *backfillTxn) Committed() func(context.Context) (*backfill.Progress, error) {
	return bt.committed
}

// Open readies a producer of its own for the entry's next publisher, a
// transaction begun, and has publish make the publisher.
func (bt *backfillTxn) Open(ctx context.Context, publish Publish) error {
	tx, err := bt.open(ctx)
	if err != nil {
		return err
	}
	pub, err := publish(tx)
	if err != nil {
		return errors.Join(err, bt.end(true))
	}
	bt.pub = pub
	return nil
}

// Handed counts a row handed over since the last commit.
func (bt *backfillTxn) Handed() { bt.pending++ }

// Cut says a Publish ended after its row was reserved: no commit may
// claim the rows handed over before it.
func (bt *backfillTxn) Cut() { bt.cut = true }

// Commit commits the rows handed over since the last commit, with
// progress, the writer sending what it holds at once meanwhile; then
// cleans them (--cleanup). A failure to clean leaves them in the table;
// the backfill stops, and its resume skips them (see
// docs/exactly-once.md).
func (bt *backfillTxn) Commit(ctx context.Context, progress backfill.Progress, acked func(context.Context) error) error {
	if bt.pub.Flush != nil {
		bt.pub.Flush(true)
		defer bt.pub.Flush(false)
	}
	if err := bt.commit(ctx, progress, acked); err != nil {
		return err
	}
	if cl := bt.pub.Cleaner; cl != nil {
		if err := cl.Release(ctx, cl.Commit()); err != nil {
			return fmt.Errorf("exactly-once backfill: committed in kafka, but cleaning the rows failed (a resume cleans them): %w", err)
		}
	}
	return nil
}

// End ends the producer of the publisher just closed (see end), and the
// connection its commits cleaned rows on.
func (bt *backfillTxn) End(drained bool) error {
	err := bt.end(drained)
	if bt.pub.Cleaner != nil {
		bt.pub.Cleaner.CloseRelease()
	}
	bt.pub = Publisher{}
	return err
}

// Seal commits, after a heal, a checkpoint at the new slot's position
// when the heal committed none (see seal).
func (bt *backfillTxn) Seal(ctx context.Context) error { return bt.seal(ctx) }
