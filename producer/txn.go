package producer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/outage"
)

// A Txn is the coordinator's side of a transactional producer for one
// transactional id, as the Java producer's TransactionManager is: Init
// takes the id (fencing any earlier holder), then each transaction is
// Begin, AddPartitions before the first batch to a partition, the caller's
// produce requests, and Commit or Abort. The Txn sends no records: the
// caller encodes batches with Header and sends them (protocol/rawproduce,
// with TransactionalID set), and reports a refused batch with Refused.
//
// Requests go through kafka-go's transport, which routes InitProducerID,
// AddPartitionsToTxn and EndTxn to the transaction coordinator by asking
// FindCoordinator (key type 1) before each one. That costs a round trip
// per request where the Java producer caches the coordinator, but it also
// means that a retry after NOT_COORDINATOR finds the new coordinator by
// itself: there is no cache to invalidate.
//
// Errors follow the Java producer's handlers (TransactionManager's
// InitProducerIdHandler, AddPartitionsToTxnHandler, EndTxnHandler):
//   - NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE (rediscover: the next
//     request asks FindCoordinator again), COORDINATOR_LOAD_IN_PROGRESS,
//     CONCURRENT_TRANSACTIONS (an earlier EndTxn still writing its
//     markers), and a lost connection are retried with backoff until the
//     context ends;
//   - PRODUCER_FENCED and INVALID_PRODUCER_EPOCH (the old coordinators'
//     word for it) are ErrFenced; TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     is ErrTxnUnauthorized; INVALID_TXN_STATE and anything unexpected
//     are ErrTxnFatal. All three are fatal: the Txn refuses every later
//     call, Init included, so that a fenced instance cannot fence the new
//     holder back;
//   - UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_ID_MAPPING, and a partition
//     AddPartitions could not add, are ErrTxnAbortable: Abort, then Begin
//     again. After the first two, Abort also bumps the epoch (KIP-360's
//     InitProducerID with the current id and epoch), as the Java
//     producer's abortableErrorIfPossible does; against a broker older
//     than 2.5, which cannot bump an epoch, that Abort fails for good
//     (ErrTxnFatal) rather than take the id afresh.
//
// Once fatal, a Txn stays fatal: a request's success that arrives after
// a fatal Refused changes nothing.
//
// A Txn's methods may be called from several goroutines; the requests
// (Init, AddPartitions, Commit, Abort) run one at a time.
type Txn struct {
	cfg TxnConfig
	log *slog.Logger

	op sync.Mutex // one transactional request at a time, as the Java producer sends them

	mu          sync.Mutex // guards the fields below
	state       txnState
	id          int64
	epoch       int16
	added       map[string]map[int32]bool // the partitions of the open transaction
	err         error                     // what put the Txn in txnAbortable or txnFatal
	bump        bool                      // the abort must bump the epoch (the coordinator lost the producer id)
	skipEnd     bool                      // the abort skips EndTxn (INVALID_PRODUCER_ID_MAPPING: the coordinator would refuse it)
	unsure      bool                      // an AddPartitions of the transaction had no verdict: the coordinator may hold it
	coordinator int32                     // the node FindCoordinator named last, for the log
}

// TxnConfig configures a Txn.
type TxnConfig struct {
	// Addr is a broker of the cluster; the transport finds the others.
	Addr net.Addr
	// Transport carries the requests; nil: kafka.DefaultTransport.
	Transport kafka.RoundTripper
	// TransactionalID names the producer across restarts. Every instance
	// sharing it fences the ones before it.
	TransactionalID string
	// Timeout is how long the coordinator lets a transaction stay open
	// before it aborts it, which also fences this producer's epoch; at
	// most the broker's transaction.max.timeout.ms (15 min by default),
	// or Init fails with INVALID_TRANSACTION_TIMEOUT. Default 60 s, the
	// Java producer's transaction.timeout.ms.
	Timeout time.Duration
	// RetryBackoff is the first pause before a request the coordinator
	// could not serve yet is retried; it doubles up to 1 s. Default
	// 100 ms (the Java producer's retry.backoff.ms and retry.backoff.max.ms).
	// The first AddPartitions of a transaction that meets
	// CONCURRENT_TRANSACTIONS waits 2 ms instead, doubling up to the Java
	// producer's 20 ms: the previous EndTxn is usually a few markers from
	// done (concurrentPause).
	RetryBackoff time.Duration
	// Logger receives the state changes (coordinator found, producer id,
	// fenced); nil: slog.Default().
	Logger *slog.Logger
	// Outage is told of each attempt of the Txn's requests, which it
	// retries without a word: it warns once per outage (internal/outage).
	// The Txn's callers report their produce requests of the transaction
	// to it too (Outage), so that one outage is one warning whichever
	// request meets it. nil: a tracker of the Txn's own, logging to
	// Logger.
	Outage *outage.Tracker
}

type txnState int

const (
	txnUninitialized txnState = iota // before the first Init
	txnReady                         // between transactions
	txnOpen                          // after Begin
	txnCommitting                    // Commit failed without a verdict: only Commit again
	txnAborting                      // Abort (EndTxn or the epoch bump) failed without a verdict: only Abort again
	txnAbortable                     // ErrTxnAbortable: only Abort
	txnFatal                         // fenced, unauthorized or lost: nothing
)

var stateNames = [...]string{"uninitialized", "ready", "in a transaction", "committing", "aborting",
	"waiting for an abort", "failed"}

func (s txnState) String() string { return stateNames[s] }

// NewTxn returns a Txn for cfg.TransactionalID; nothing is sent before
// Init.
func NewTxn(cfg TxnConfig) (*Txn, error) {
	if cfg.TransactionalID == "" {
		return nil, errors.New("transactional producer: TransactionalID is empty")
	}
	if cfg.Addr == nil {
		return nil, errors.New("transactional producer: Addr is nil")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.Timeout < time.Millisecond || cfg.Timeout.Milliseconds() > 1<<31-1 {
		return nil, fmt.Errorf("transactional producer: Timeout %s out of range", cfg.Timeout)
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.Transport == nil {
		cfg.Transport = kafka.DefaultTransport
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With(slog.String("transactional_id", cfg.TransactionalID))
	if cfg.Outage == nil {
		cfg.Outage = outage.New(log)
	}
	return &Txn{cfg: cfg, id: -1, epoch: -1, coordinator: -1, log: log}, nil
}

// Outage is the tracker the Txn reports its requests' attempts to, which
// the produce requests of its transactions report to as well.
func (t *Txn) Outage() *outage.Tracker { return t.cfg.Outage }

// TransactionalID is the id the caller's produce requests must carry.
func (t *Txn) TransactionalID() string { return t.cfg.TransactionalID }

// Producer returns the producer id and epoch of the last Init (−1, −1
// before it). A partition's sequence numbers start at 0 for each pair.
func (t *Txn) Producer() (id int64, epoch int16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id, t.epoch
}

// Header returns the header of a batch of the open transaction whose first
// record has sequence number seq in its partition: the producer id and
// epoch, the transactional bit.
func (t *Txn) Header(seq int32) BatchHeader {
	t.mu.Lock()
	defer t.mu.Unlock()
	return BatchHeader{ProducerID: t.id, ProducerEpoch: t.epoch, BaseSequence: seq, Transactional: true}
}

// Added reports whether partition of topic is in the open transaction: a
// batch to any other partition is refused by the broker.
func (t *Txn) Added(topic string, partition int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == txnOpen && t.added[topic][partition]
}

// Begin opens a transaction, on the client only (the coordinator learns of
// it at the first AddPartitions), as the Java producer's beginTransaction.
func (t *Txn) Begin() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return err
	}
	if t.state != txnReady {
		return fmt.Errorf("begin a transaction: the producer is %s", t.state)
	}
	t.state, t.added = txnOpen, map[string]map[int32]bool{}
	return nil
}

// Refused records the broker's refusal (err, a kafka.Error from a produce
// response, after the caller's own retries of transient ones) of a batch
// of the open transaction, and returns what it means for the Txn, as the
// Java producer's maybeTransitionToErrorState: PRODUCER_FENCED and
// INVALID_PRODUCER_EPOCH are ErrFenced (fatal); an authorization failure
// of the transactional id is fatal; anything else makes the transaction
// abortable. (Since KIP-588 the Java producer makes a produce's
// INVALID_PRODUCER_EPOCH abortable, to survive a coordinator that aborted
// a transaction past its timeout; here it is fenced: a transaction that
// outlived its timeout means the caller's sizing is wrong, and stopping is
// the safe answer.)
func (t *Txn) Refused(err error) error {
	var code kafka.Error
	errors.As(err, &code)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch code {
	case kafka.ProducerFenced, kafka.InvalidProducerEpoch:
		return t.fail("Produce", ErrFenced, err)
	case kafka.TransactionalIDAuthorizationFailed, kafka.ClusterAuthorizationFailed:
		return t.fail("Produce", ErrTxnUnauthorized, err)
	}
	if t.state == txnFatal {
		return t.err
	}
	if code == kafka.UnknownProducerId || code == kafka.OutOfOrderSequenceNumber || code == 0 {
		// The partition's leader lost or doubts the producer's sequence, or
		// the batch's fate is unknown (no answer): as the Java producer
		// (epochBumpRequired), Abort bumps the epoch, which resets every
		// partition's sequence; a plain abort would leave the partition
		// refusing every later transaction.
		t.bump = true
	}
	return t.fail("Produce", ErrTxnAbortable, err)
}

// usable returns the fatal error, if any. Called with mu held.
func (t *Txn) usable() error {
	if t.state == txnFatal {
		return t.err
	}
	return nil
}

// fail moves the Txn to the state kind calls for and returns its error. A
// fatal state is never left; an abortable one only by Abort. Called with
// mu held.
func (t *Txn) fail(op string, kind, err error) error {
	if t.state == txnFatal {
		return t.err
	}
	e := &TxnError{Op: op, Kind: kind, Err: err}
	if kind == ErrTxnAbortable {
		if t.state == txnOpen || t.state == txnCommitting || t.state == txnAbortable {
			t.state, t.err = txnAbortable, e
		}
		return e
	}
	t.state, t.err = txnFatal, e
	if kind == ErrFenced {
		// Debug: the owner of the Txn logs the one line an operator reads
		// (the relay: fenced, standing by).
		t.log.Debug("fenced: another producer holds the transactional id; this one never writes again",
			slog.Int64("producer_id", t.id), slog.Int("epoch", int(t.epoch)), slog.String("op", op))
	} else {
		t.log.Error("transactional producer failed for good", slog.String("op", op), slog.Any("err", err))
	}
	return e
}

// refused returns the verdict on code, a transactional request's refusal,
// as the Java handlers share it: PRODUCER_FENCED and
// INVALID_PRODUCER_EPOCH are ErrFenced, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// is ErrTxnUnauthorized, INVALID_TXN_STATE is ErrTxnFatal, and any other
// code is otherwise, the request's own verdict. Called with mu held.
func (t *Txn) refused(op string, code kafka.Error, otherwise error) error {
	switch code {
	case kafka.ProducerFenced, kafka.InvalidProducerEpoch:
		return t.fail(op, ErrFenced, code)
	case kafka.TransactionalIDAuthorizationFailed:
		return t.fail(op, ErrTxnUnauthorized, code)
	case kafka.InvalidTransactionState:
		return t.fail(op, ErrTxnFatal, code)
	}
	return t.fail(op, otherwise, code)
}

// lost reports whether code says the coordinator lost the producer id
// (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING), and then makes the
// abort bump the epoch, as the Java producer's abortableErrorIfPossible
// does; after INVALID_PRODUCER_ID_MAPPING without EndTxn, which the
// coordinator would refuse. Called with mu held.
func (t *Txn) lost(code kafka.Error) bool {
	if code != kafka.UnknownProducerId && code != kafka.InvalidProducerIDMapping {
		return false
	}
	t.bump, t.skipEnd = true, code == kafka.InvalidProducerIDMapping
	return true
}

// unanswered reports whether err, a request's, is no verdict: the context
// ended, or the transport failed, before the coordinator's answer.
func unanswered(err error) bool {
	var te *TxnError
	return err != nil && !errors.As(err, &te)
}

// fatal reports whether err is a fatal verdict.
func fatal(err error) bool {
	var te *TxnError
	return errors.As(err, &te) && te.Fatal()
}
