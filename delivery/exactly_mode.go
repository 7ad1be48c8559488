package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// exactlyOnceMode publishes whole Postgres transactions in Kafka
// transactions with a checkpoint of the last one (see exactly). It lasts
// across sessions: ghosts and timeouts are what earlier sessions found.
type exactlyOnceMode struct {
	cfg Config
	env Env
	// ghosts is the last failover's ghost range counted, set by
	// openExactly (sessions run one at a time): a range is counted once,
	// however many sessions find the old timeline's checkpoint the newest.
	ghosts checkpoint.Ghosts
	// timeouts: the last transaction the broker aborted by its timeout.
	timeouts txnTimeouts
}

// newExactlyOnceMode refuses a Config or Env without a func exactly-once
// calls (it would panic at its first call), naming each missing one.
func newExactlyOnceMode(cfg Config, env Env) (Mode, error) {
	var missing []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Config.TransactionalID", cfg.TransactionalID != nil},
		{"Env.Connect", env.Connect != nil},
		{"Env.Identify", env.Identify != nil},
		{"Env.SlotPosition", env.SlotPosition != nil},
		{"Env.NextXid", env.NextXid != nil},
	} {
		if !f.set {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("delivery %s needs %s", cfg.Mode, strings.Join(missing, ", "))
	}
	return &exactlyOnceMode{cfg: cfg, env: env}, nil
}

// Ready creates the checkpoint topic, or checks it, before the first
// session.
func (m *exactlyOnceMode) Ready(ctx context.Context) error {
	if err := m.ensureCheckpointTopic(ctx); err != nil {
		return err
	}
	m.env.Log.Info("delivery", slog.String("mode", fmt.Sprintf("%s (checkpoints in %s, transactions every %s)",
		m.cfg.Mode, m.cfg.CheckpointTopic, m.cfg.TransactionInterval)))
	if m.cfg.ForcedBackfill {
		m.env.Log.Warn("exactly-once: --backfill-force publishes again rows the slot streams, at least once " +
			"(consumers drop them by the id header)")
	}
	return nil
}

func (m *exactlyOnceMode) Session(track Acked, start pglogrepl.LSN) Session {
	x := newExactly(track, m.cfg, start, m.env.Log)
	x.ended = m.env.Transaction
	return exactlyOnce{exactly: x, m: m}
}

// Backfill is the backfill's exactly-once (backfillTxn), unless forced: a
// forced backfill publishes again what the slot streams, at least once,
// as Ready warned.
func (m *exactlyOnceMode) Backfill(force, heal bool) Backfill {
	if force {
		return atLeastOnceBackfill{}
	}
	return &backfillTxn{m: m, heal: heal}
}

// exactlyOnce is a session's exactly-once delivery: exactly's gate,
// committer and checkpoint, with what the session asks of them at its
// start and its end.
type exactlyOnce struct {
	*exactly
	m *exactlyOnceMode
}

// Position is the end of the last Postgres transaction a Kafka commit
// holds. It may lag Confirmed a little: that moves on the receive loop
// only, and this is read from any goroutine.
func (x exactlyOnce) Position() pglogrepl.LSN { return pglogrepl.LSN(x.committed.Load()) }

// Open identifies the system before streaming, starts streaming from
// start, and takes the transactional id once the slot is held
// (openExactly); the session's publisher's writer is transactional.
func (x exactlyOnce) Open(ctx context.Context, stream Stream, start pglogrepl.LSN, publish Publish) error {
	sys, err := stream.System(ctx)
	if err != nil {
		return err
	}
	// After a failover, where the server's timeline branched from the
	// checkpoint's: checkpoint.Resume trusts it up to there.
	switches, err := stream.Switches(ctx, sys.Timeline)
	if err != nil {
		return err
	}
	if err := stream.Start(ctx, start); err != nil {
		return err
	}
	txn, err := x.m.openExactly(ctx, x.exactly, sys, switches, start)
	if err == nil {
		var pub Publisher
		if pub, err = publish(&transactional{txn: txn, ckpt: x.ckpt, pacing: x.m.cfg.TransactionInterval}); err == nil {
			x.flush, x.heldLimit = pub.Flush, x.m.cfg.MaxInFlight
			if pub.Cleaner != nil {
				x.clean = pub.Cleaner
			}
			return nil
		}
	}
	return errors.Join(err, x.Finish(context.Background(), false, true))
}

// ReadFailed stamps a failure of the handler's own on the clock, timed
// before the drain (see txnClock).
func (x exactlyOnce) ReadFailed() { x.clock.fail() }

// DrainsWhenSlotGone is false: the session's open Kafka transaction is
// aborted as on any loss, its rows stay unpublished and uncleaned, and the
// heal reads them once.
func (exactlyOnce) DrainsWhenSlotGone() bool { return false }

// transactional is what makes a publisher's writer transactional
// (exactly-once): its producer, with a transaction begun, and the
// checkpoint writer of that producer, whose partition each transaction
// adds with its first. pacing: requests wait for the transaction
// interval, as the stream's do (see pacing); 0 for the backfill's.
type transactional struct {
	txn    *producer.Txn
	ckpt   *producer.CheckpointWriter
	pacing time.Duration
}

func (tx *transactional) Transaction() sink.Transaction {
	return withCheckpoint{Txn: tx.txn, topic: tx.ckpt.Topic(), partition: tx.ckpt.Partition()}
}

func (tx *transactional) BatchTimeout(t time.Duration) time.Duration { return pacing(t, tx.pacing) }

// pacing is the least time between two produce requests to one broker
// given --batch-timeout. In exactly-once it is at least the transaction
// interval: records are invisible until the commit, which sends what
// gathered at once (Flush), so requests leave no more often than commits:
// fewer, fuller requests for the broker (at 1,000 tx/s 42 a second instead
// of 156, docs/exactly-once.md) and no later visibility. A full batch still
// leaves at once, and so does every request while a Postgres transaction
// spans a commit's tick (exactly.takeGate), so a large transaction streams.
func pacing(batchTimeout, interval time.Duration) time.Duration {
	return max(batchTimeout, interval)
}

// RowAcked acks the event now, for the commit and the window; its row is
// cleaned once the commit is made (exactly.commit releases it).
func (tx *transactional) RowAcked(c *cleanup.Cleaner, token uint64, reason string, ack func(uint64)) {
	c.Hold(token, reason)
	ack(token)
}
