package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/addpartitionstotxn"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/endtxn"
	"github.com/segmentio/kafka-go/protocol/findcoordinator"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
)

// concurrentBackoff is the longest pause before retrying the first
// AddPartitions of a transaction refused with CONCURRENT_TRANSACTIONS:
// the Java producer's ADD_PARTITIONS_RETRY_BACKOFF_MS, its only pause.
const concurrentBackoff = 20 * time.Millisecond

// concurrentPause is the pause before the nth retry (from 0) of a
// transaction's first AddPartitions refused with CONCURRENT_TRANSACTIONS:
// 2 ms, doubling up to concurrentBackoff. The refusal means the last
// commit's markers are still being written, which on a healthy broker
// takes a few milliseconds; the coordinator answers it from memory, so an
// early retry costs it little, while a fixed 20 ms pause delayed the whole
// next transaction behind it: at 1,000 tx/s in exactly-once, about 3% of
// commits met it, and their events made the p99 (docs/benchmarks.md).
func concurrentPause(n int) time.Duration {
	if n >= 4 {
		return concurrentBackoff
	}
	return min(2*time.Millisecond<<n, concurrentBackoff)
}

// Init takes the transactional id: it finds the transaction coordinator
// and asks InitProducerID for a producer id and epoch, which fences every
// earlier holder (their epoch is now old; the coordinator aborts their open
// transaction first). Called again between transactions, it sends the
// producer id and epoch it holds (KIP-360), so that a coordinator that gave
// the id to another instance meanwhile answers PRODUCER_FENCED instead of
// fencing that instance. Either way the epoch changes: sequence numbers
// start again at 0. Against a broker older than 2.5 (InitProducerID below
// v3) the id and epoch are not sent: every Init is a fresh one, which
// fences whoever holds the id, as a new instance's does; call it only to
// take the id.
//
// An Init that ends without a verdict (an error that is not a *TxnError)
// may have bumped the epoch all the same: until Init succeeds, only Init
// is allowed (it resends the id and epoch held, which the coordinator
// answers as a retry).
//
// Init refuses while a transaction is open or ending: the coordinator
// would abort it by bumping the epoch, and the retried InitProducerID,
// carrying the old epoch, would be fenced (the reason the Java producer
// sends EndTxn before an epoch bump). Abort first; after a commit without
// a verdict, Commit again, or leave this Txn for a new one, whose Init
// settles the transaction (completing a commit the coordinator had begun,
// aborting one it had not).
func (t *Txn) Init(ctx context.Context) error {
	t.op.Lock()
	defer t.op.Unlock()
	t.mu.Lock()
	err := t.usable()
	if err == nil && t.state != txnUninitialized && t.state != txnReady {
		err = fmt.Errorf("init the transactional producer: it is %s", t.state)
	}
	if err == nil {
		t.state = txnUninitialized
	}
	id, epoch := t.id, t.epoch
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := t.findCoordinator(ctx); err != nil {
		return err
	}
	return t.initProducerID(ctx, id, epoch)
}

// findCoordinator asks which broker coordinates the transactional id. The
// requests that follow ask again, through kafka-go's routing; this one
// reads the answer's error, which kafka-go's routing ignores, so that Init
// fails with the reason (an authorization, a cluster without transaction
// support) rather than a refusal from a broker that is not the coordinator.
// As the Java FindCoordinatorHandler: COORDINATOR_NOT_AVAILABLE (the
// transaction state log not yet created or led) is retried,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED is fatal, and so is any other
// error.
func (t *Txn) findCoordinator(ctx context.Context) error {
	const op = "FindCoordinator"
	req := &findcoordinator.Request{Key: t.cfg.TransactionalID, KeyType: 1}
	return t.exchange(ctx, op, req, false, func(res kafka.Response, code kafka.Error) error {
		if code != 0 {
			return t.refused(op, code, ErrTxnFatal)
		}
		r := res.(*findcoordinator.Response)
		if t.coordinator != r.NodeID {
			t.log.Info("transaction coordinator found", slog.Int("node", int(r.NodeID)),
				slog.String("host", net.JoinHostPort(r.Host, fmt.Sprint(r.Port))))
		}
		t.coordinator = r.NodeID
		return nil
	})
}

// initProducerID asks for a producer id and epoch; id and epoch are the
// ones held (−1 at first). As the Java InitProducerIdHandler: coordinator
// errors and CONCURRENT_TRANSACTIONS (the coordinator still aborting the
// previous holder's transaction) are retried; PRODUCER_FENCED and
// INVALID_PRODUCER_EPOCH are fenced; an authorization failure (of the
// transactional id, or of the cluster) is fatal, and so is anything else
// (INVALID_TRANSACTION_TIMEOUT: the timeout exceeds the broker's maximum).
func (t *Txn) initProducerID(ctx context.Context, id int64, epoch int16) error {
	const op = "InitProducerID"
	req := &initproducerid.Request{TransactionalID: t.cfg.TransactionalID,
		TransactionTimeoutMs: int32(t.cfg.Timeout.Milliseconds()), ProducerID: id, ProducerEpoch: epoch}
	return t.exchange(ctx, op, req, false, func(res kafka.Response, code kafka.Error) error {
		switch code {
		case 0:
			r := res.(*initproducerid.Response)
			t.id, t.epoch, t.state, t.err = r.ProducerID, r.ProducerEpoch, txnReady, nil
			t.added, t.unsure, t.bump, t.skipEnd = nil, false, false, false
			t.log.Info("transactional producer ready", slog.Int64("producer_id", t.id), slog.Int("epoch", int(t.epoch)),
				slog.Int("coordinator", int(t.coordinator)))
			return nil
		case kafka.ClusterAuthorizationFailed:
			return t.fail(op, ErrTxnUnauthorized, code)
		}
		return t.refused(op, code, ErrTxnFatal)
	})
}

// AddPartitions adds to the open transaction those of partitions (topic →
// partition numbers) that it does not hold yet; the caller may produce to
// a partition once this returned nil for it. As the Java
// AddPartitionsToTxnHandler: coordinator errors, CONCURRENT_TRANSACTIONS
// and UNKNOWN_TOPIC_OR_PARTITION (metadata not yet everywhere) are retried;
// PRODUCER_FENCED and INVALID_PRODUCER_EPOCH are fenced;
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED and INVALID_TXN_STATE are fatal;
// UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING, TOPIC_AUTHORIZATION_FAILED,
// OPERATION_NOT_ATTEMPTED and any other partition error make the
// transaction abortable. An error that is not a *TxnError (the context
// ended while retrying, an unexpected transport failure) leaves the
// transaction open: AddPartitions may be called again. The coordinator
// may have added the partitions all the same, so the transaction's Commit
// or Abort then ends it with EndTxn even if no partition is known in it.
func (t *Txn) AddPartitions(ctx context.Context, partitions map[string][]int32) error {
	const op = "AddPartitionsToTxn"
	t.op.Lock()
	defer t.op.Unlock()
	t.mu.Lock()
	req, first, err := t.addRequest(partitions)
	t.mu.Unlock()
	if err != nil || req == nil {
		return err
	}
	err = t.exchange(ctx, op, req, first, func(_ kafka.Response, code kafka.Error) error {
		if code != 0 {
			t.lost(code)
			return t.refused(op, code, ErrTxnAbortable)
		}
		if t.state != txnOpen {
			return t.err // made abortable meanwhile (Refused): it cannot commit
		}
		for _, topic := range req.Topics {
			if t.added[topic.Name] == nil {
				t.added[topic.Name] = map[int32]bool{}
			}
			for _, p := range topic.Partitions {
				t.added[topic.Name][p] = true
			}
		}
		return nil
	})
	if unanswered(err) {
		t.mu.Lock()
		t.unsure = t.unsure || t.state == txnOpen || t.state == txnAbortable
		t.mu.Unlock()
	}
	return err
}

// addRequest returns the request adding those of partitions the open
// transaction lacks (nil: none), and whether the transaction holds no
// partition yet. Called with mu held.
func (t *Txn) addRequest(partitions map[string][]int32) (*addpartitionstotxn.Request, bool, error) {
	if err := t.usable(); err != nil {
		return nil, false, err
	}
	if t.state == txnAbortable {
		return nil, false, t.err
	}
	if t.state != txnOpen {
		return nil, false, fmt.Errorf("add partitions to a transaction: the producer is %s", t.state)
	}
	req := &addpartitionstotxn.Request{TransactionalID: t.cfg.TransactionalID, ProducerID: t.id, ProducerEpoch: t.epoch}
	for _, topic := range sortedKeys(partitions) {
		var missing []int32
		for _, p := range partitions[topic] {
			if !t.added[topic][p] && !slices.Contains(missing, p) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			req.Topics = append(req.Topics, addpartitionstotxn.RequestTopic{Name: topic, Partitions: missing})
		}
	}
	if len(req.Topics) == 0 {
		return nil, false, nil
	}
	return req, len(t.added) == 0, nil
}

// addAnswer collapses an AddPartitionsToTxn response's partition errors
// into one: a retriable one first (the Java handler retries the whole
// request at the first), then the most telling refusal, then
// OPERATION_NOT_ATTEMPTED (only a consequence of another's error).
func addAnswer(r *addpartitionstotxn.Response) kafka.Error {
	var worst kafka.Error
	for _, topic := range r.Results {
		for _, p := range topic.Results {
			code := kafka.Error(p.ErrorCode)
			switch {
			case code == 0:
			case coordinatorBusy(code) || code == kafka.UnknownTopicOrPartition:
				return code
			case worst == 0 || worst == operationNotAttempted:
				worst = code
			}
		}
	}
	return worst
}

// operationNotAttempted is OPERATION_NOT_ATTEMPTED, which kafka-go names
// BrokerAuthorizationFailed (its code in older Kafka versions).
const operationNotAttempted = kafka.Error(55)

func sortedKeys(m map[string][]int32) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// coordinatorBusy reports whether code is the coordinator's "not now":
// NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE (the next request asks
// FindCoordinator again), COORDINATOR_LOAD_IN_PROGRESS, and
// CONCURRENT_TRANSACTIONS. The Java producer retries each of them for
// every transactional request.
func coordinatorBusy(code kafka.Error) bool {
	switch code {
	case kafka.NotCoordinatorForGroup, kafka.GroupCoordinatorNotAvailable, kafka.GroupLoadInProgress,
		kafka.ConcurrentTransactions:
		return true
	}
	return false
}

// answerOf reads a response's error code, and whether it is worth a retry:
// the coordinator's "not now" (coordinatorBusy), and for AddPartitionsToTxn
// UNKNOWN_TOPIC_OR_PARTITION too.
func answerOf(res kafka.Response) (code kafka.Error, retry bool) {
	switch r := res.(type) {
	case *addpartitionstotxn.Response:
		code = addAnswer(r)
		return code, coordinatorBusy(code) || code == kafka.UnknownTopicOrPartition
	case *findcoordinator.Response:
		code = kafka.Error(r.ErrorCode)
	case *initproducerid.Response:
		code = kafka.Error(r.ErrorCode)
	case *endtxn.Response:
		code = kafka.Error(r.ErrorCode)
	case *apiversions.Response:
		code = kafka.Error(r.ErrorCode)
	default:
		return kafka.Error(-1), false // UNKNOWN_SERVER_ERROR: not an answer to a request the Txn sends
	}
	return code, coordinatorBusy(code)
}

// exchange sends req (see call) and hands its answer to settle, with mu
// held, for the verdict; an error that is not a *TxnError is no verdict.
// A Txn that turned fatal while req was out (Refused, from a produce
// response another goroutine read) stays fatal whatever the answer:
// settle is skipped. Every state change a request's answer makes goes
// through here (or through fail, which keeps a fatal state too).
func (t *Txn) exchange(ctx context.Context, op string, req kafka.Request, quick bool,
	settle func(res kafka.Response, code kafka.Error) error) error {
	res, code, err := t.call(ctx, op, req, quick)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return err
	}
	return settle(res, code)
}

// call sends req until its answer is not worth a retry (answerOf), and
// returns the response and its error code. A lost connection is retried
// too, as the Java producer re-enqueues a request whose connection
// dropped. Each attempt is told to the Outage tracker, which warns when
// the retries last. Pauses double from RetryBackoff up to 1 s; quick
// retries CONCURRENT_TRANSACTIONS sooner (concurrentPause). It returns an error when the context
// ends or the transport fails otherwise.
func (t *Txn) call(ctx context.Context, op string, req kafka.Request, quick bool) (kafka.Response, kafka.Error, error) {
	pause := t.cfg.RetryBackoff
	var last error
	busy := 0 // CONCURRENT_TRANSACTIONS answers, for quick
	for attempt := 1; ; attempt++ {
		res, err := t.cfg.Transport.RoundTrip(ctx, t.cfg.Addr, req)
		switch {
		case err == nil:
			code, retry := answerOf(res)
			if !retry {
				t.cfg.Outage.Succeeded() // answered, a refusal too: the coordinator is there
				return res, code, nil
			}
			last = code
		case ctx.Err() == nil && lostConnection(err):
			last = err
		case last != nil:
			return nil, 0, fmt.Errorf("%s (attempt %d; before: %w): %w", op, attempt, last, err)
		default:
			return nil, 0, fmt.Errorf("%s: %w", op, err)
		}
		t.cfg.Outage.Failed(op, last)
		wait := pause
		if quick && errors.Is(last, kafka.ConcurrentTransactions) {
			wait = concurrentPause(busy)
			busy++
		} else {
			pause = min(2*pause, time.Second)
		}
		t.log.Debug("transactional request retried", slog.String("op", op), slog.Int("attempt", attempt), slog.Any("err", last))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, 0, fmt.Errorf("%s (attempt %d; last: %w): %w", op, attempt, last, ctx.Err())
		case <-timer.C:
		}
	}
}

// lostConnection reports whether err is the network's or a broker's
// unavailability, which a retry may outlast (kafka-go answers
// BrokerNotAvailable for a coordinator its metadata does not list yet).
func lostConnection(err error) bool {
	var ne net.Error
	var ke kafka.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.As(err, &ne):
		return true
	case errors.As(err, &ke):
		return ke == kafka.BrokerNotAvailable || ke.Temporary()
	}
	return false
}
