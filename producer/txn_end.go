package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/endtxn"
)

// Commit commits the open transaction: once it returns nil, a
// read_committed consumer sees every batch the caller had acknowledged
// in it. The caller must have every batch of the transaction acknowledged
// first (the Java producer flushes before EndTxn): a batch still in flight
// may land after the commit marker, outside the transaction.
//
// A transaction no partition was added to ends without a request, as in
// the Java producer. An abortable transaction is not committed: Commit
// returns its error and the caller must Abort. An error that is not a
// *TxnError (the context ended while the coordinator was busy, the
// connection failed otherwise) leaves the outcome unknown: call Commit
// again (EndTxn is idempotent: a coordinator that committed already
// answers success), or give up this Txn for a new one, whose Init
// completes a commit the coordinator had begun and aborts one it had not;
// then only a read (of the checkpoint) tells which.
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
	if len(t.added) == 0 {
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
// (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING) it also bumps the
// epoch, as the Java producer does (EndTxn first, unless the coordinator
// no longer maps the id, then InitProducerID with the id and epoch held):
// Producer returns the new epoch, and sequence numbers start again at 0.
// A Commit without a verdict cannot be aborted (the coordinator may have
// committed it): Commit again, or use a new Txn.
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
	skipEnd := t.skipEnd || len(t.added) == 0
	t.state = txnAborting
	t.mu.Unlock()
	if !skipEnd {
		err := t.end(ctx, false)
		var te *TxnError
		if err != nil && !(errors.As(err, &te) && !te.Fatal()) {
			return err
		}
	}
	t.mu.Lock()
	bump, id, epoch := t.bump, t.id, t.epoch
	if !bump {
		t.state, t.added, t.err = txnReady, nil, nil
	}
	t.mu.Unlock()
	if !bump {
		return nil
	}
	return t.initProducerID(ctx, id, epoch)
}

// end sends EndTxn. As the Java EndTxnHandler: coordinator errors and
// CONCURRENT_TRANSACTIONS are retried; PRODUCER_FENCED and
// INVALID_PRODUCER_EPOCH are fenced; TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// and INVALID_TXN_STATE (an abort of a committed transaction, say) are
// fatal; UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_ID_MAPPING are abortable
// with an epoch bump; anything else is fatal. On success the Txn is ready
// for the next transaction.
func (t *Txn) end(ctx context.Context, commit bool) error {
	op := "EndTxn(abort)"
	if commit {
		op = "EndTxn(commit)"
	}
	t.mu.Lock()
	req := &endtxn.Request{TransactionalID: t.cfg.TransactionalID, ProducerID: t.id, ProducerEpoch: t.epoch, Committed: commit}
	t.mu.Unlock()
	_, code, err := t.call(ctx, op, req, busyOr(func(r kafka.Response) kafka.Error {
		return kafka.Error(r.(*endtxn.Response).ErrorCode)
	}), false)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch code {
	case 0:
		t.state, t.added, t.err = txnReady, nil, nil
		return nil
	case kafka.ProducerFenced, kafka.InvalidProducerEpoch:
		return t.fail(op, ErrFenced, code)
	case kafka.TransactionalIDAuthorizationFailed:
		return t.fail(op, ErrTxnUnauthorized, code)
	case kafka.UnknownProducerId, kafka.InvalidProducerIDMapping:
		t.bump, t.skipEnd = true, code == kafka.InvalidProducerIDMapping
		if t.state == txnAborting {
			// Abort goes on to the epoch bump.
			return &TxnError{Op: op, Kind: ErrTxnAbortable, Err: code}
		}
		return t.fail(op, ErrTxnAbortable, code)
	}
	return t.fail(op, ErrTxnFatal, code)
}
