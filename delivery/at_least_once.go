package delivery

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// atLeastOnceMode publishes every event once or, after a crash, more:
// the slot is confirmed as the tracker confirms, past every event
// acknowledged.
type atLeastOnceMode struct{}

func (atLeastOnceMode) Ready(context.Context) error { return nil }

func (atLeastOnceMode) Session(track Acked, _ pglogrepl.LSN) Session {
	return atLeastOnce{Acked: track}
}

func (atLeastOnceMode) Backfill(bool, bool) Backfill { return atLeastOnceBackfill{} }

func (atLeastOnceMode) Judge(error) (error, bool) { return nil, false }

// atLeastOnce is a session's at-least-once delivery: no transaction, no
// gate; what is confirmed is the tracker's (its Confirmed and
// ConfirmIdle, the stream's replication.Progress).
type atLeastOnce struct {
	Acked
}

func (atLeastOnce) Skips(pglogrepl.LSN, bool) bool { return false }
func (atLeastOnce) Enter(context.Context) error    { return nil }
func (atLeastOnce) Handing(*decode.Event)          {}
func (atLeastOnce) Leave(pglogrepl.LSN)            {}

func (a atLeastOnce) Position() pglogrepl.LSN { return a.Acked.Confirmed() }

func (atLeastOnce) Open(ctx context.Context, stream Stream, start pglogrepl.LSN, publish Publish) error {
	if err := stream.Start(ctx, start); err != nil {
		return err
	}
	_, err := publish(atLeastOnceWrites{})
	return err
}

func (atLeastOnce) Start(context.Context, func(error))       {}
func (atLeastOnce) Fail(error)                               {}
func (atLeastOnce) ReadFailed()                              {}
func (atLeastOnce) DrainsWhenSlotGone() bool                 { return true }
func (atLeastOnce) Finish(context.Context, bool, bool) error { return nil }
func (atLeastOnce) TimedOut(err error) error                 { return err }

// atLeastOnceWrites is an at-least-once publisher's writer: not
// transactional, paced by --batch-timeout, a row cleaned as soon as its
// event is acknowledged (and acknowledged once clean).
type atLeastOnceWrites struct{}

func (atLeastOnceWrites) Transaction() sink.Transaction              { return nil }
func (atLeastOnceWrites) BatchTimeout(t time.Duration) time.Duration { return t }

func (atLeastOnceWrites) RowAcked(c *cleanup.Cleaner, token uint64, reason string, _ func(uint64)) {
	c.Done(token, reason) // acks once the row is deleted or marked
}

// atLeastOnceBackfill is a backfill published at least once: its rows
// are not committed, each row's progress is recorded as it is
// acknowledged (backfill's own).
type atLeastOnceBackfill struct{}

func (atLeastOnceBackfill) Committed() func(context.Context) (*backfill.Progress, error) { return nil }

func (atLeastOnceBackfill) Open(_ context.Context, publish Publish) error {
	_, err := publish(atLeastOnceWrites{})
	return err
}

func (atLeastOnceBackfill) Handed() {}
func (atLeastOnceBackfill) Cut()    {}

func (atLeastOnceBackfill) Commit(context.Context, backfill.Progress, func(context.Context) error) error {
	return nil
}

func (atLeastOnceBackfill) End(bool) error             { return nil }
func (atLeastOnceBackfill) Seal(context.Context) error { return nil }
