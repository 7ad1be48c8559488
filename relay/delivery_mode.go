package relay

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// mode is a delivery mode as the relay drives it: readied once before
// the first session, then a deliverer for each session. The pipeline,
// the session and the publisher call the mode's deliverer and never ask
// which mode it is.
type mode interface {
	// ready does what the mode needs done once, before any slot is
	// created or streamed (exactly-once: its checkpoint topic).
	ready(ctx context.Context, r *Relay) error
	// session returns the delivery of a session whose slot starts at
	// start, acknowledged through track.
	session(r *Relay, track *checkpoint.Tracker, start pglogrepl.LSN) deliverer
}

// modes is where each Delivery.Mode is wired to its implementation: a
// new mode is its own delivery_*.go file and one line here (and its name
// in Delivery.validate).
var modes = map[DeliveryMode]mode{
	AtLeastOnce: atLeastOnceMode{},
	ExactlyOnce: exactlyOnceMode{},
}

// mode is the relay's delivery mode: at-least-once unless another is
// wired (Config.Validate refuses a mode it does not know).
func (r *Relay) mode() mode {
	if m, ok := modes[r.cfg.Delivery.Mode]; ok {
		return m
	}
	return atLeastOnceMode{}
}

// atLeastOnceMode publishes every event once or, after a crash, more:
// the slot is confirmed as the tracker confirms, past every event
// acknowledged.
type atLeastOnceMode struct{}

func (atLeastOnceMode) ready(context.Context, *Relay) error { return nil }

func (atLeastOnceMode) session(r *Relay, track *checkpoint.Tracker, _ pglogrepl.LSN) deliverer {
	return atLeastOnce{Tracker: track, r: r}
}

// atLeastOnce is a session's at-least-once delivery: no transaction, no
// gate; what is confirmed is the tracker's (its Confirmed and
// ConfirmIdle, the stream's replication.Progress).
type atLeastOnce struct {
	*checkpoint.Tracker
	r *Relay
}

func (atLeastOnce) skips(pglogrepl.LSN, bool) bool { return false }
func (atLeastOnce) enter(context.Context) error    { return nil }
func (atLeastOnce) handing(*decode.Event)          {}
func (atLeastOnce) leave(pglogrepl.LSN)            {}

func (a atLeastOnce) position() pglogrepl.LSN { return a.Tracker.Confirmed() }

func (a atLeastOnce) open(ctx context.Context, stream *replication.Stream, start pglogrepl.LSN, hold func(context.Context)) (*publisher, error) {
	if err := stream.Start(ctx, start); err != nil {
		return nil, err
	}
	return a.r.newPublisher(ctx, a.Tracker, hold, atLeastOnceWrites{})
}

func (atLeastOnce) start(context.Context, func(error))       {}
func (atLeastOnce) fail(error)                               {}
func (atLeastOnce) readFailed()                              {}
func (atLeastOnce) drainsWhenSlotGone() bool                 { return true }
func (atLeastOnce) finish(context.Context, bool, bool) error { return nil }
func (atLeastOnce) timedOut(err error) error                 { return err }

// atLeastOnceWrites is an at-least-once publisher's writer: not
// transactional, paced by --batch-timeout, a row cleaned as soon as its
// event is acknowledged (and acknowledged once clean).
type atLeastOnceWrites struct{}

func (atLeastOnceWrites) transaction() sink.Transaction                          { return nil }
func (atLeastOnceWrites) batchTimeout(_ Delivery, t time.Duration) time.Duration { return t }

func (atLeastOnceWrites) rowAcked(c *cleanup.Cleaner, token uint64, reason string, _ func(uint64)) {
	c.Done(token, reason) // acks once the row is deleted or marked
}
