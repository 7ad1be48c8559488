package producer

import (
	"errors"

	"github.com/segmentio/kafka-go"
)

// ErrNoRecords is returned for a batch of no records, which Kafka refuses.
var ErrNoRecords = errors.New("record batch without records")

// The kinds of a transactional producer's failure (see TxnError). The
// first three are fatal: the Txn refuses every later call, and the caller
// must never write with its transactional id again unless a person (or a
// deliberate takeover) decides otherwise.
var (
	// ErrFenced: another producer took the transactional id (its
	// InitProducerID bumped the epoch), or the coordinator answered with
	// an epoch that is no longer ours (PRODUCER_FENCED,
	// INVALID_PRODUCER_EPOCH). Writing on would race the new holder.
	ErrFenced = errors.New("producer fenced: another instance holds the transactional id")
	// ErrTxnUnauthorized: the principal may not use the transactional id
	// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or CLUSTER_AUTHORIZATION_FAILED
	// for InitProducerID). An ACL must change first.
	ErrTxnUnauthorized = errors.New("not authorized to use the transactional id")
	// ErrTxnFatal: any other failure the Java producer treats as fatal
	// (INVALID_TXN_STATE, an error the coordinator should never send, an
	// invalid transaction timeout): the producer's state and the
	// coordinator's no longer agree.
	ErrTxnFatal = errors.New("transactional producer failed")
	// ErrTxnAbortable: the open transaction cannot commit (a partition
	// could not be added, a batch was refused, the coordinator lost the
	// producer id); Abort it, then begin again.
	ErrTxnAbortable = errors.New("the transaction must be aborted")
)

// TxnError is a transactional request refused for good: Op names the
// request, Kind is one of the sentinels above, Err the broker's error
// (a kafka.Error) or what else failed. errors.Is matches both.
type TxnError struct {
	Op   string
	Kind error
	Err  error
}

func (e *TxnError) Error() string { return e.Op + ": " + e.Kind.Error() + ": " + e.Err.Error() }

func (e *TxnError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Fatal reports whether the Txn is unusable: everything but an abortable
// transaction.
func (e *TxnError) Fatal() bool { return e.Kind != ErrTxnAbortable }

// Retriable tells the relay's retry loop (internal/retry) that a fatal
// failure cannot be mended by another session, and an abortable one can
// (after Abort).
func (e *TxnError) Retriable() bool { return !e.Fatal() }

// RefusedForEpochOrState reports whether err is what a transactional
// producer meets once the coordinator aborted its transaction with a
// bumped epoch (a transaction timeout, or another instance taking the
// transactional id): fenced (ErrFenced), or the broker's
// INVALID_PRODUCER_EPOCH, PRODUCER_FENCED or INVALID_TXN_STATE, which a
// produce to a partition the abort took out of the transaction meets.
func RefusedForEpochOrState(err error) bool {
	return err != nil && (errors.Is(err, ErrFenced) || errors.Is(err, kafka.InvalidProducerEpoch) ||
		errors.Is(err, kafka.ProducerFenced) || errors.Is(err, kafka.InvalidTransactionState))
}
