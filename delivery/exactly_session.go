package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// openTimeout bounds taking the transactional id, and reading the last
// checkpoint, at a session's start. Meanwhile the session holds the slot
// without reading it: well below wal_sender_timeout (60 s by default), so
// that a session that cannot open gives the slot back (to another
// instance, say) before Postgres ends it, rather than taking the id after
// another took the slot, and fencing it. A failure is retried by a new
// session.
var openTimeout = 20 * time.Second

// ensureCheckpointTopic creates the checkpoint topic of exactly-once, or
// checks that it is compacted, before the first session.
func (m *exactlyOnceMode) ensureCheckpointTopic(ctx context.Context) error {
	cluster := m.env.Connect()
	defer cluster.Close()
	created, err := cluster.EnsureCheckpointTopic(ctx, m.cfg.CheckpointTopic, m.cfg.CheckpointReplicationFactor)
	if err != nil {
		return fmt.Errorf("checkpoint topic %s: %w", m.cfg.CheckpointTopic, err)
	}
	if created {
		m.env.Log.Info("created the checkpoint topic", slog.String("topic", m.cfg.CheckpointTopic))
	}
	return nil
}

// openExactly takes the transactional id once the session holds the slot
// (fencing whoever held it before: taking it earlier would fence the
// instance streaming the slot), reads the last committed checkpoint, and
// decides with the slot's position (start) what the session skips. It
// returns the transaction, begun, for the session's writer.
func (m *exactlyOnceMode) openExactly(ctx context.Context, x *exactly, sys replication.System, switches replication.Switches, start pglogrepl.LSN) (*producer.Txn, error) {
	d, log := m.cfg, m.env.Log
	cluster := m.env.Connect()
	x.cluster = cluster // its connections are closed with x
	txn, err := cluster.NewTxn(producer.TxnConfig{
		TransactionalID: d.TransactionalID(sys.ID), Timeout: d.TransactionTimeout, Logger: log,
		Outage: m.env.Outage})
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := txn.Init(octx); err != nil {
		return nil, fmt.Errorf("exactly-once: take the transactional id %s: %w", txn.TransactionalID(), err)
	}
	key := checkpoint.Key(sys.ID, d.Slot)
	rec, found, err := cluster.ReadCheckpoint(octx, d.CheckpointTopic, key)
	if err != nil {
		return nil, fmt.Errorf("exactly-once: read the last checkpoint from %s (another slot's transaction left open there holds the read "+
			"until the broker aborts it, within its transaction timeout): %w", d.CheckpointTopic, err)
	}
	if found && rec.SystemID == sys.ID && rec.Timeline == sys.Timeline && rec.EndLSN > sys.WALEnd {
		return nil, stopError(fmt.Sprintf("exactly-once: the checkpoint of slot %s ends at %s, past the server's WAL end %s "+
			"on the same system and timeline: the database went back in time (restored from a snapshot or backup) and "+
			"the checkpoint names transactions it no longer has. Starting there would skip new ones. Reset the slot's checkpoint "+
			"with a tombstone under its key %q in %s (docs/exactly-once.md#operations)", d.Slot, rec.EndLSN, sys.WALEnd, key, d.CheckpointTopic))
	}
	decision := checkpoint.Resume(start, checkpoint.System{ID: sys.ID, Timeline: sys.Timeline, Switches: switches}, rec, found)
	// A checkpoint trusted names a transaction the server must have had;
	// one past a failover's branch point (ghosts) is the old timeline's,
	// whose ids the promoted server may never have assigned.
	if decision.Start > start && decision.Ghosts == nil {
		if err := m.checkNotRestored(octx, rec, key); err != nil {
			return nil, err
		}
	}
	if decision.Warn {
		log.Warn(decision.Reason, slog.String("slot", d.Slot))
	} else {
		log.Info(decision.Reason, slog.String("slot", d.Slot))
	}
	if g := decision.Ghosts; g != nil && *g != m.ghosts { // once per failover, not per session
		m.ghosts = *g
		if m.env.FailoverGhosts != nil {
			m.env.FailoverGhosts(uint64(g.To - g.From))
		}
	}
	if decision.Start > start {
		x.skip = decision.Start
		if !d.Cleanup {
			x.raise(decision.Start)
		}
		// With --cleanup, the rows of the transactions skipped may be
		// left to clean (cleanup.Hold): the tracker moves past them as
		// they are cleaned (relay's pipeline.skipped).
	}
	if x.ckpt, err = cluster.NewCheckpointWriter(ctx, txn, d.CheckpointTopic, key); err != nil {
		return nil, fmt.Errorf("exactly-once: %w", err)
	}
	host, _ := os.Hostname()
	x.txn = txn
	x.base = checkpoint.Record{Slot: d.Slot, Database: sys.Database, SystemID: sys.ID, Timeline: sys.Timeline,
		Host: host, PID: os.Getpid()}
	if err := txn.Begin(); err != nil {
		return nil, err
	}
	id, epoch := txn.Producer()
	log.Info("exactly-once: transactional producer ready", slog.String("transactional_id", txn.TransactionalID()),
		slog.Int64("producer_id", id), slog.Int("epoch", int(epoch)))
	return txn, nil
}

// withCheckpoint is the writer's transaction: each transaction's first
// AddPartitions also adds the checkpoint's partition, so that the commit,
// during which nothing else is published, saves the round trips of adding
// it then.
type withCheckpoint struct {
	*producer.Txn
	topic     string
	partition int32
}

func (w withCheckpoint) AddPartitions(ctx context.Context, partitions map[string][]int32) error {
	if !w.Added(w.topic, w.partition) && !slices.Contains(partitions[w.topic], w.partition) {
		partitions = maps.Clone(partitions)
		partitions[w.topic] = append(slices.Clone(partitions[w.topic]), w.partition)
	}
	return w.Txn.AddPartitions(ctx, partitions)
}

// finish ends the session's Kafka transaction once reading stopped and the
// writer closed: committed when every event handed over is acknowledged
// and no Postgres transaction is half handed over, aborted otherwise (its
// Postgres transactions are read again by the next session). drained says
// the writer had every request answered: otherwise a produce request it
// gave up on may still reach a broker after an abort marker, and with the
// same epoch open a transaction there that the coordinator does not know
// of (a hanging transaction, which a later commit to that partition would
// commit). Then the transaction is left to the next session's
// InitProducerID, which aborts it with a bumped epoch that fences such
// requests, or to the coordinator's timeout.
//
// A commit under way when the session ends is cut short when commit is
// false (its events may never be acknowledged: the writer abandoned them)
// or once ctx ends (the drain timeout); otherwise it finishes first.
func (x *exactly) Finish(ctx context.Context, commit, drained bool) error {
	if !commit {
		x.abort(errors.New("the session ended without a commit"))
	}
	stop := context.AfterFunc(ctx, func() { x.abort(context.Cause(ctx)) })
	defer stop()
	x.halt()
	if x.cluster != nil {
		defer x.cluster.Close()
	}
	if x.clean != nil {
		defer x.clean.CloseRelease()
	}
	if x.txn == nil {
		return nil // the session ended before its transaction was ready
	}
	if commit && drained && !x.held && !x.unsure && x.uncommitted.Load() > 0 {
		select {
		case x.gate <- struct{}{}:
		default:
			return errors.New("exactly-once: the commit gate is held at the end of the session")
		}
		err := x.commit()
		<-x.gate
		if err == nil {
			if err := x.settle(); err != nil {
				x.log.Warn("the last kafka transaction committed, but its rows were not cleaned: the next session cleans them", slog.Any("err", err))
			}
			return nil
		}
		x.log.Warn("the last kafka transaction did not commit: its events are read again by the next session", slog.Any("err", err))
	}
	if x.uncommitted.Load() == 0 {
		return nil
	}
	if x.ended != nil {
		x.ended(false, 0)
	}
	if !drained || x.unsure {
		x.log.Info("leaving the open kafka transaction to the next session, whose InitProducerID aborts it and fences what is still in flight")
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := x.txn.Abort(actx); err != nil {
		return fmt.Errorf("abort the kafka transaction: %w", err)
	}
	return nil
}
