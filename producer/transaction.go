package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/outage"
)

// Transaction is the transactional producer a writer's batches belong to,
// for exactly-once delivery: Txn, initialised (its producer id
// and epoch are the writer's for its whole life) and with a transaction
// begun. The caller commits and begins transactions between the writer's
// batches: it waits for every event it handed over to be acknowledged
// before it commits, and hands over nothing more until it began the next.
//
// A transactional writer sends every batch with the producer id, epoch
// and transactional bit, adds each partition to the open transaction
// before its first batch, and never renews its producer id: a batch the
// broker refuses for its producer (fenced, its sequence lost) fails with
// the Transaction's verdict, as does a partition the coordinator would not
// add. Those events, and what is queued behind them in their partition,
// fail; the caller abandons the transaction and starts again from its
// checkpoint. Transient failures (a leader moved, too few in-sync
// replicas, no answer) are retried with the same sequence, which the
// broker writes once.
type Transaction interface {
	TransactionalID() string
	Producer() (id int64, epoch int16)
	Added(topic string, partition int32) bool
	AddPartitions(ctx context.Context, partitions map[string][]int32) error
	Refused(err error) error
	// Outage is told of the writer's produce requests as well as the
	// Transaction's own, so that an outage is one warning whichever
	// request meets it; nil: the writer's own tracker.
	Outage() *outage.Tracker
}

// transactional reports whether the writer is.
func (w *Writer) transactional() bool { return w.cfg.Transaction != nil }

// startTransactional sets the writer's producer session to the
// Transaction's: its partitions' sequences start at 0 under it.
func (w *Writer) startTransactional() {
	id, epoch := w.cfg.Transaction.Producer()
	w.idem.renewed(session{id: id, epoch: epoch})
}

// enlist adds the partitions of batches that the open transaction lacks.
func (w *Writer) enlist(batches []batch) error {
	if !w.transactional() {
		return nil
	}
	var missing map[string][]int32
	for _, b := range batches {
		topic, id := b.p.tp.topic, int32(b.p.tp.id)
		if w.cfg.Transaction.Added(topic, id) || slices.Contains(missing[topic], id) {
			continue
		}
		if missing == nil {
			missing = map[string][]int32{}
		}
		missing[topic] = append(missing[topic], id)
	}
	if missing == nil {
		return nil
	}
	if err := w.cfg.Transaction.AddPartitions(w.abandon, missing); err != nil {
		var txnErr *TxnError
		if errors.As(err, &txnErr) && txnErr.Op != "AddPartitionsToTxn" {
			return &TransactionError{fmt.Errorf("the transaction failed earlier: %w", err)}
		}
		return &TransactionError{fmt.Errorf("add partitions to the transaction: %w", err)}
	}
	return nil
}

// TransactionError is a record's fate when its transaction, not its
// batch, answers for the failure (the producer fenced, a partition the
// coordinator would not add): the batch is failed as it is, never retried
// nor salvaged, and the caller abandons the transaction.
type TransactionError struct{ err error }

func (e *TransactionError) Error() string { return e.err.Error() }
func (e *TransactionError) Unwrap() error { return e.err }

// refusedInTransaction returns the Transaction's verdict on err when the
// writer is transactional and err ends the transaction: a refusal of the
// producer, or a transaction error already. Otherwise nil.
func (w *Writer) refusedInTransaction(err error) error {
	if !w.transactional() || err == nil {
		return nil
	}
	var te *TransactionError
	if errors.As(err, &te) {
		return te
	}
	var txnErr *TxnError
	if errors.As(err, &txnErr) {
		return &TransactionError{err}
	}
	if fenced(err) || errors.Is(err, kafka.ProducerFenced) || errors.Is(err, kafka.InvalidTransactionState) ||
		errors.Is(err, kafka.TransactionalIDAuthorizationFailed) || errors.Is(err, kafka.TransactionCoordinatorFenced) {
		return &TransactionError{fmt.Errorf("produce in the transaction: %w", w.cfg.Transaction.Refused(err))}
	}
	return nil
}

// failInTransaction reports b's events failed with err and stops b's
// partition: nothing more is sent in a transaction that cannot commit.
func (s *sender) failInTransaction(b batch, err error) {
	w := s.w
	to := b.p.refused(b, err)
	b.p.report(w)
	s.handOver(to)
	w.health.refused(err, "produce %d messages to %s/%d in a transaction: %v", len(b.msgs), b.p.tp.topic, b.p.tp.id, err)
}

// queueDeadLetter sends the dead letter of msg, which the broker refused
// for what it is (one says why), through the queue of its own partition,
// like every dead letter decided before sending, so that it joins the
// open transaction of a transactional writer; a salvage sends only to the
// partition it holds. The dead letter carries msg's token and the reason;
// its fate is msg's, which the dead letter's partition tells only to
// queueDeadLetter (settled), not to Done: the salvage reports it through
// msg's own partition, after that partition's earlier events (Done is
// called in order within a partition). queueDeadLetter waits for it, so
// that the salvage goes on (or stops its partition) once msg is settled,
// as it would for a message of its own.
func (w *Writer) queueDeadLetter(msg, dl Outgoing, one *Error) (reason string, err error) {
	settled := make(chan error, 1)
	dl.Token, dl.Reason, dl.Commit, dl.Meta, dl.settled = msg.Token, one.Reason, time.Time{}, msg.Meta, settled
	if err := w.write(w.abandon, dl, true); err != nil {
		return msg.Reason, fmt.Errorf("dead-letter the event the broker refused (%s): %w", one.Reason, err)
	}
	if err := <-settled; err != nil {
		return one.Reason, err
	}
	w.cfg.DeadLetters.Lettered(msg, dl, one)
	return one.Reason, nil
}

// Flush, while on, sends what is queued at once instead of pacing requests
// BatchTimeout apart: a Kafka commit waiting for the last acknowledgements
// holds back every event behind it, so the last batches should not wait.
func (w *Writer) Flush(on bool) {
	w.flushing.Store(on)
	if on {
		w.index.wakeAll()
	}
}

// inTransactionCount returns, for a transactional writer whose open
// transaction holds events of topic while its count changed (d, its
// drain), the count its events were routed by, cut from c: a key's later
// events stay in its old partition until the transaction commits. Its
// commit markers reach the partitions one after the other, so the key's
// next event, in a new partition of the same transaction, could be
// readable before the earlier ones. The next transaction routes by the new
// count (route), and is readable only after this one is.
func (w *Writer) inTransactionCount(topic string, c topicCount, d drain) (topicCount, bool) {
	n := d.from
	if !d.fromOK || !w.transactional() || !d.on || n > len(c.ids) {
		return topicCount{}, false
	}
	held := w.topicBusy(topic) // queued or out, so in this transaction
	for id := 0; !held && id < len(c.ids); id++ {
		held = w.cfg.Transaction.Added(topic, int32(id))
	}
	if !held {
		return topicCount{}, false
	}
	return topicCount{ids: c.ids[:n], leaders: c.leaders[:n], at: c.at}, true
}
