package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// backfillTxn is a backfill's exactly-once: its rows go in Kafka
// transactions under the slot's transactional id, each with a checkpoint
// record of the backfill's progress, so that a backfill cut short resumes
// past exactly the rows Kafka holds (backfill.Committer). Each publisher
// the entry opens has a producer of its own (an InitProducerID: the
// sequences of a new writer start again at 0), whose transactions end
// with the entry's Drain.
type backfillTxn struct {
	m *exactlyOnceMode
	// base is the record every commit writes, with the progress: the
	// stream's position as the last checkpoint left it (for the stream to
	// resume from after the backfill), or, with none, the slot's
	// position (where the stream starts).
	base  checkpoint.Record
	found bool
	read  bool // base was read
	key   string
	sys   replication.System
	// heal: the backfill is a heal (--on-slot-lost heal). Its slot is new,
	// so the stream after it starts at the slot's consistent point, and
	// what the lost slot's last checkpoint names (a position perhaps past
	// a restored server's WAL end, or on a timeline since left) must no
	// longer be resumed from: every record it commits names the new slot.
	heal bool
	// wrote: a commit wrote a record (seal has nothing to add).
	wrote bool

	// Of the publisher open.
	pub     Publisher
	cluster *producer.Cluster
	txn     *producer.Txn
	ckpt    *producer.CheckpointWriter
	pending int64 // rows handed over since the last commit
	// cut: a Publish ended after its row was reserved, which may still be
	// sent: no commit may claim the rows handed over before it.
	cut bool
	// unsure: a commit failed after it began writing its record: the
	// transaction is left to the next InitProducerID, never aborted with
	// the epoch that may still commit it.
	unsure bool
}

// identify learns the system the slot is on, once: the transactional id
// and the checkpoint's key name it.
func (bt *backfillTxn) identify(ctx context.Context) error {
	if bt.key != "" {
		return nil
	}
	sys, err := bt.m.env.Identify(ctx)
	if err != nil {
		return fmt.Errorf("exactly-once backfill: %w", err)
	}
	bt.sys, bt.key = sys, checkpoint.Key(sys.ID, bt.m.cfg.Slot)
	return nil
}

// committed fences the slot's earlier instances (an InitProducerID under
// its transactional id) and returns the backfill's progress in the last
// committed checkpoint; see backfill.Config.Committed.
func (bt *backfillTxn) committed(ctx context.Context) (*backfill.Progress, error) {
	if err := bt.identify(ctx); err != nil {
		return nil, err
	}
	cluster := bt.m.env.Connect()
	defer cluster.Close()
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if _, err := bt.initTxn(octx, cluster); err != nil {
		return nil, err
	}
	b, err := bt.readLast(octx, cluster)
	if err != nil {
		return nil, fmt.Errorf("%w (another slot's transaction left open there holds the read until the broker aborts it, within its transaction timeout)", err)
	}
	if b == nil {
		return nil, nil
	}
	p := &backfill.Progress{Table: b.Table, ConsistentPoint: b.ConsistentPoint, Snapshot: b.Snapshot, Done: b.Done, Finished: b.Finished}
	if b.After != nil {
		p.After = &backfill.Key{Values: b.After}
	}
	return p, nil
}

// readLast reads the last committed checkpoint, once the transactional id
// is taken: base is the record each commit writes (with its backfill's
// progress); the backfill progress in it is returned.
func (bt *backfillTxn) readLast(ctx context.Context, cluster *producer.Cluster) (*checkpoint.Backfill, error) {
	rec, found, err := cluster.ReadCheckpoint(ctx, bt.m.cfg.CheckpointTopic, bt.key)
	if err != nil {
		return nil, fmt.Errorf("exactly-once backfill: read the last checkpoint from %s: %w", bt.m.cfg.CheckpointTopic, err)
	}
	progress := rec.Backfill
	bt.base, bt.found, bt.read = rec, found, true
	bt.base.Backfill = nil
	if !found || bt.heal {
		// The stream, after the backfill, starts where the slot is: the
		// record says so (nothing confirms the slot during a backfill).
		at, err := bt.slotPosition(ctx)
		if err != nil {
			return nil, err
		}
		sys := bt.sys
		bt.base = checkpoint.Record{Slot: bt.m.cfg.Slot, Database: sys.Database, SystemID: sys.ID,
			Timeline: sys.Timeline, CommitLSN: at, EndLSN: at}
		if !found {
			progress = nil
		}
	}
	bt.base.Host, _ = os.Hostname()
	bt.base.PID = os.Getpid()
	return progress, nil
}

// slotPosition is the slot's confirmed position.
func (bt *backfillTxn) slotPosition(ctx context.Context) (pglogrepl.LSN, error) {
	at, err := bt.m.env.SlotPosition(ctx)
	if err != nil {
		return 0, fmt.Errorf("exactly-once backfill: %w", err)
	}
	return at, nil
}

// initTxn takes the transactional id: a producer whose InitProducerID
// fenced every earlier holder.
func (bt *backfillTxn) initTxn(ctx context.Context, cluster *producer.Cluster) (*producer.Txn, error) {
	d := bt.m.cfg
	txn, err := cluster.NewTxn(producer.TxnConfig{
		TransactionalID: d.TransactionalID(bt.sys.ID), Timeout: d.TransactionTimeout, Logger: bt.m.env.Log})
	if err != nil {
		return nil, err
	}
	if err := txn.Init(ctx); err != nil {
		return nil, fmt.Errorf("exactly-once backfill: take the transactional id %s: %w", txn.TransactionalID(), err)
	}
	return txn, nil
}

// open readies a producer of its own for the entry's next publisher, a
// transaction begun.
func (bt *backfillTxn) open(ctx context.Context) (*transactional, error) {
	if err := bt.identify(ctx); err != nil {
		return nil, err
	}
	cluster := bt.m.env.Connect()
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	txn, err := bt.initTxn(octx, cluster)
	if err == nil && !bt.read {
		_, err = bt.readLast(octx, cluster)
	}
	if err == nil {
		bt.ckpt, err = cluster.NewCheckpointWriter(octx, txn, bt.m.cfg.CheckpointTopic, bt.key)
	}
	if err == nil {
		err = txn.Begin()
	}
	if err != nil {
		cluster.Close()
		return nil, err
	}
	bt.cluster, bt.txn, bt.pending, bt.cut, bt.unsure = cluster, txn, 0, false, false
	return &transactional{txn: txn, ckpt: bt.ckpt}, nil
}

// commit writes progress's record into the open transaction and commits
// it, once every row handed over is acknowledged (acked, bounded by ctx),
// then begins the next.
func (bt *backfillTxn) commit(ctx context.Context, progress backfill.Progress, acked func(context.Context) error) error {
	switch {
	case bt.cut:
		return errors.New("exactly-once backfill: a row's publish was cut short, and may still be sent: its transaction cannot commit")
	case bt.unsure:
		// Its record may be written: writing another, with the same
		// sequence, would be taken for it.
		return errors.New("exactly-once backfill: the last commit's outcome is unknown: its transaction is left to the next InitProducerID")
	}
	cctx, cancel := context.WithTimeout(ctx, bt.m.cfg.TransactionTimeout)
	defer cancel()
	if err := acked(cctx); err != nil {
		return fmt.Errorf("exactly-once backfill: wait for the rows' acknowledgements: %w", err)
	}
	rec := bt.base
	rec.Backfill = &checkpoint.Backfill{Table: progress.Table, ConsistentPoint: progress.ConsistentPoint, Snapshot: progress.Snapshot,
		Done: progress.Done, Finished: progress.Finished}
	if progress.After != nil {
		rec.Backfill.After = progress.After.Values
	}
	if _, err := rec.Encode(); err != nil { // refused before anything is written
		return fmt.Errorf("exactly-once backfill: %w", err)
	}
	bt.unsure = true
	if err := bt.ckpt.Write(cctx, rec); err != nil {
		return fmt.Errorf("exactly-once backfill: %w", err)
	}
	if err := bt.txn.Commit(cctx); err != nil {
		return fmt.Errorf("exactly-once backfill: commit the kafka transaction (%d rows of %s): %w", progress.Done, progress.Table, err)
	}
	bt.unsure, bt.pending, bt.wrote = false, 0, true
	return bt.txn.Begin()
}

// seal commits, after a heal that committed no record (it published no
// row), a checkpoint at the new slot's position in a transaction of its
// own: the lost slot's last record, which the stream would resume from
// otherwise, may name a position past a restored server's WAL end (the
// relay would stop), or one the new slot reaches later (it would skip
// what lies between).
func (bt *backfillTxn) seal(ctx context.Context) error {
	if bt.wrote {
		return nil
	}
	if _, err := bt.open(ctx); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, bt.m.cfg.TransactionTimeout)
	defer cancel()
	bt.unsure = true
	err := bt.ckpt.Write(cctx, bt.base)
	if err == nil {
		err = bt.txn.Commit(cctx)
	}
	if err != nil {
		_ = bt.end(false) // left to the next InitProducerID
		return fmt.Errorf("exactly-once heal: commit a checkpoint at the new slot's position %s: %w", bt.base.EndLSN, err)
	}
	bt.unsure, bt.wrote = false, true
	bt.m.env.Log.Info("exactly-once heal: checkpoint at the new slot", slog.String("slot", bt.m.cfg.Slot), slog.String("lsn", bt.base.EndLSN.String()))
	bt.txn = nil // committed: nothing for end to abort
	bt.cluster.Close()
	bt.cluster, bt.ckpt = nil, nil
	return nil
}

// end ends the producer of the publisher just closed: its open
// transaction, with rows uncommitted, is aborted when the writer drained
// (drained) and no commit is in doubt; otherwise left to the next
// InitProducerID, which aborts it with a bumped epoch that fences what is
// still in flight.
func (bt *backfillTxn) end(drained bool) error {
	if bt.txn == nil {
		return nil
	}
	defer bt.cluster.Close()
	txn := bt.txn
	pending, leave := bt.pending, !drained || bt.unsure
	bt.cluster, bt.txn, bt.ckpt = nil, nil, nil
	switch {
	case pending == 0 && !bt.unsure:
		return nil
	case leave:
		bt.m.env.Log.Info("exactly-once backfill: leaving the open kafka transaction to the next InitProducerID, which aborts it",
			slog.Int64("rows", pending))
		return nil
	}
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := txn.Abort(actx); err != nil {
		return fmt.Errorf("exactly-once backfill: abort the kafka transaction: %w", err)
	}
	return nil
}
