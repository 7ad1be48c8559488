package relay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// exactlyOnceMode publishes whole Postgres transactions in Kafka
// transactions with a checkpoint of the last one (see exactly).
type exactlyOnceMode struct{}

// ready creates the checkpoint topic, or checks it, before the first
// session.
func (exactlyOnceMode) ready(ctx context.Context, r *Relay) error {
	if err := r.ensureCheckpointTopic(ctx); err != nil {
		return err
	}
	r.log.Info("delivery", slog.String("mode", r.cfg.Delivery.String()))
	if r.backfilled() && r.cfg.BackfillForce {
		r.log.Warn("exactly-once: --backfill-force publishes again rows the slot streams, at least once " +
			"(consumers drop them by the id header)")
	}
	return nil
}

func (exactlyOnceMode) session(r *Relay, track *checkpoint.Tracker, start pglogrepl.LSN) deliverer {
	x := newExactly(track, r.cfg.Delivery, start, r.log)
	x.ended = r.metrics.Transaction
	return exactlyOnce{exactly: x, r: r}
}

// exactlyOnce is a session's exactly-once delivery: exactly's gate,
// committer and checkpoint, with what the session asks of them at its
// start and its end.
type exactlyOnce struct {
	*exactly
	r *Relay
}

// position is the end of the last Postgres transaction a Kafka commit
// holds. It may lag Confirmed a little: that moves on the receive loop
// only, and this is read from any goroutine.
func (x exactlyOnce) position() pglogrepl.LSN { return pglogrepl.LSN(x.committed.Load()) }

// open identifies the system before streaming, starts streaming from
// start, and takes the transactional id once the slot is held
// (openExactly); it returns the session's publisher, whose writer is
// transactional.
func (x exactlyOnce) open(ctx context.Context, stream *replication.Stream, start pglogrepl.LSN, hold func(context.Context)) (*publisher, error) {
	sys, err := stream.System(ctx)
	if err != nil {
		return nil, err
	}
	// After a failover, where the server's timeline branched from the
	// checkpoint's: checkpoint.Resume trusts it up to there.
	switches, err := stream.Switches(ctx, sys.Timeline)
	if err != nil {
		return nil, err
	}
	if err := stream.Start(ctx, start); err != nil {
		return nil, err
	}
	r := x.r
	txn, err := r.openExactly(ctx, x.exactly, sys, switches, start)
	if err == nil {
		var pub *publisher
		if pub, err = r.newPublisher(ctx, x.track, hold, &transactional{txn: txn, ckpt: x.ckpt, paced: true}); err == nil {
			x.flush, x.heldLimit = pub.writer.Flush, r.cfg.Stream.MaxInFlight
			if pub.cleaner != nil { // not a nil *Cleaner in a non-nil interface
				x.clean = pub.cleaner
			}
			return pub, nil
		}
	}
	return nil, errors.Join(err, x.finish(context.Background(), false, true))
}

// readFailed stamps a failure of the handler's own on the clock, timed
// before the drain (see txnClock).
func (x exactlyOnce) readFailed() { x.clock.fail() }

// drainsWhenSlotGone is false: the session's open Kafka transaction is
// aborted as on any loss, its rows stay unpublished and uncleaned, and the
// heal reads them once.
func (exactlyOnce) drainsWhenSlotGone() bool { return false }

// transactional is what makes a publisher's writer transactional
// (exactly-once): its producer, with a transaction begun, and the
// checkpoint writer of that producer, whose partition each transaction
// adds with its first. paced: requests wait for the transaction interval
// (Delivery.pacing), as the stream's do.
type transactional struct {
	txn   *producer.Txn
	ckpt  *producer.CheckpointWriter
	paced bool
}

func (tx *transactional) transaction() sink.Transaction {
	return withCheckpoint{Txn: tx.txn, topic: tx.ckpt.Topic(), partition: tx.ckpt.Partition()}
}

func (tx *transactional) batchTimeout(d Delivery, t time.Duration) time.Duration {
	if !tx.paced {
		return t
	}
	return d.pacing(t)
}

// rowAcked acks the event now, for the commit and the window; its row is
// cleaned once the commit is made (exactly.commit releases it).
func (tx *transactional) rowAcked(c *cleanup.Cleaner, token uint64, reason string, ack func(uint64)) {
	c.Hold(token, reason)
	ack(token)
}
