package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/endtxn"
)

// Commit commits the open transaction: once it returns nil, a
// read_committed consumer sees every batch the caller had acknowledged
// in it. The caller must have every batch of the transaction acknowledged
// first (the Java producer flushes before EndTxn): a batch still in flight
// may land after the commit marker, outside the transaction.
//
// A transaction no partition was added to ends without a request, as in
// the Java producer, unless an AddPartitions of it ended without a verdict
// (the coordinator may hold the transaction). An abortable transaction is
// not committed: Commit returns its error and the caller must Abort. An
// error that is not a *TxnError (the context ended while the coordinator
// was busy, the connection failed otherwise) leaves the outcome unknown:
// call Commit again (EndTxn is idempotent: a coordinator that committed
// already answers success), or give up this Txn for a new one, whose Init
// completes a commit the coordinator had begun and aborts one it had not;
// then only a read (of the checkpoint) tells which. A Txn that turned
// fatal while EndTxn was out (Refused, from another goroutine) returns its
// fatal error even if the coordinator committed: a read tells there too.
func (t *Txn) Commit(ctx context.Context) error {
	t.op.Lock()
	defer t.op.Unlock()
	t.mu.Lock()
	switch t.state {
	case txnFatal, txnAbortable:
		err := t.err
		t.mu.Unlock()
		return err
	case txnOpen, txnCommitting:
	default:
		state := t.state
		t.mu.Unlock()
		return fmt.Errorf("commit a transaction: the producer is %s", state)
	}
	if len(t.added) == 0 && !t.unsure {
		t.state, t.added = txnReady, nil
		t.mu.Unlock()
		return nil
	}
	t.state = txnCommitting
	t.mu.Unlock()
	return t.end(ctx, true)
}

// Abort aborts the open or abortable transaction: a read_committed
// consumer never sees its batches. With no transaction open it does
// nothing. After an abortable error that lost the producer id
// (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING, or a batch refused
// for its producer state or without an answer: see Refused) it also bumps
// the epoch, as the Java producer does (EndTxn first, unless the
// coordinator no longer maps the id, then InitProducerID with the id and
// epoch held): Producer returns the new epoch, and sequence numbers start
// again at 0. An Abort that ends without a verdict (an error that is not a
// *TxnError), the bump's included, leaves only Abort allowed: call it
// again. A Commit without a verdict cannot be aborted (the coordinator may
// have committed it): Commit again, or use a new Txn.
//
// Abort does not wait for the transaction's produce requests: that is the
// caller's job. Every batch sent in the transaction must have its answer
// before Abort (or Commit), each refused or unanswered one reported with
// Refused. A batch still in flight may be appended after the abort marker:
// on a broker without KIP-890's verification (before 3.6, or with
// transaction.partition.verification.enable off) it then opens a
// transaction on its partition that the coordinator does not know of,
// which holds back read_committed consumers until the next transaction of
// this producer to that partition ends it, committing the aborted batch if
// that one commits. Closing the connection of a request is not waiting
// for it: the broker may have read it. When a request was given up
// unanswered, leave this Txn instead of aborting: a new Txn's Init, or the
// coordinator at the transaction timeout, aborts the transaction with a
// bumped epoch, whose markers make the partitions refuse the late batch.
// (The relay waits for its writer to drain, or abandons it, before Abort.)
func (t *Txn) Abort(ctx context.Context) error {
	t.op.Lock()
	defer t.op.Unlock()
	t.mu.Lock()
	switch t.state {
	case txnFatal:
		err := t.err
		t.mu.Unlock()
		return err
	case txnUninitialized, txnReady:
		t.mu.Unlock()
		return nil
	case txnCommitting:
		t.mu.Unlock()
		return errors.New("abort a transaction: its commit has no verdict yet; commit again, or use a new Txn")
	}
	skipEnd := t.skipEnd || (len(t.added) == 0 && !t.unsure)
	t.state = txnAborting
	t.mu.Unlock()
	if !skipEnd {
		// An abortable verdict is the producer id lost: Abort goes on to the bump.
		if err := t.end(ctx, false); unanswered(err) || fatal(err) {
			return err
		}
	}
	t.mu.Lock()
	if err := t.usable(); err != nil {
		t.mu.Unlock()
		return err
	}
	bump, id, epoch := t.bump, t.id, t.epoch
	if !bump {
		t.state, t.added, t.unsure, t.err = txnReady, nil, false, nil
	}
	t.mu.Unlock()
	if !bump {
		return nil
	}
	if err := t.bumpable(ctx); err != nil {
		return err
	}
	return t.initProducerID(ctx, id, epoch)
}

// end sends EndTxn. As the Java EndTxnHandler: coordinator errors and
// CONCURRENT_TRANSACTIONS are retried; PRODUCER_FENCED and
// INVALID_PRODUCER_EPOCH are fenced; TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// and INVALID_TXN_STATE (an abort of a committed transaction, say) are
// fatal; UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_ID_MAPPING are abortable
// with an epoch bump; anything else is fatal. On success the Txn is ready
// for the next transaction, unless Abort has an epoch bump to do.
//
// An EndTxn sent only because an AddPartitions had no verdict (no
// partition known in the transaction) and answered INVALID_TXN_STATE
// found no transaction of this producer open on the coordinator (it is
// Empty, or the last one is complete or completing: an abort of an open
// transaction is never refused so): there is nothing to end.
func (t *Txn) end(ctx context.Context, commit bool) error {
	op := "EndTxn(abort)"
	if commit {
		op = "EndTxn(commit)"
	}
	t.mu.Lock()
	req := &endtxn.Request{TransactionalID: t.cfg.TransactionalID, ProducerID: t.id, ProducerEpoch: t.epoch, Committed: commit}
	t.mu.Unlock()
	return t.exchange(ctx, op, req, false, func(_ kafka.Response, code kafka.Error) error {
		if code == kafka.InvalidTransactionState && t.unsure && len(t.added) == 0 {
			code = 0
		}
		switch {
		case code == 0:
			t.added, t.unsure = nil, false
			if t.state != txnAborting || !t.bump {
				t.state, t.err = txnReady, nil
			}
			return nil
		case t.lost(code):
			if t.state == txnAborting {
				return &TxnError{Op: op, Kind: ErrTxnAbortable, Err: code} // Abort goes on to the epoch bump
			}
			return t.fail(op, ErrTxnAbortable, code)
		}
		return t.refused(op, code, ErrTxnFatal)
	})
}

// bumpable returns nil when the coordinator can bump the epoch of the
// producer id held: InitProducerID v3 (KIP-360, Kafka 2.5). Below it the
// id and epoch are not sent, and the bump would be a fresh InitProducerID:
// what a new holder of the transactional id sends, fencing whoever holds
// it, such as an instance that took the id after this one lost its
// producer id. That is right only when this Txn is the holder, which it
// cannot know; so, as the Java producer (coordinatorSupportsBumpingEpoch),
// the Txn then fails for good with ErrTxnFatal, and the caller takes the
// id deliberately with a new Txn's Init. The versions are those of the
// broker kafka-go's transport sends ApiVersions to (the bootstrap
// connection): all brokers of a cluster agree outside a rolling upgrade.
// An error that is not a *TxnError is no answer: Abort again.
func (t *Txn) bumpable(ctx context.Context) error {
	const op = "ApiVersions"
	res, code, err := t.call(ctx, op, &apiversions.Request{}, false)
	if err == nil && code != 0 {
		err = fmt.Errorf("%s: %w", op, code)
	}
	if err != nil {
		return err
	}
	top := int16(-1)
	for _, k := range res.(*apiversions.Response).ApiKeys {
		if k.ApiKey == int16(protocol.InitProducerId) {
			top = k.MaxVersion
		}
	}
	if top >= 3 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fail("InitProducerID", ErrTxnFatal, fmt.Errorf("the broker's InitProducerID goes up to v%d, "+
		"below v3 (Kafka 2.5, KIP-360): an epoch bump would take the transactional id afresh, fencing any other holder", top))
}
