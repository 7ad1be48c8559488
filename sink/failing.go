package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
	"github.com/outbox-cdc/outbox-cdc/internal/outage"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// health tracks whether produce requests are failing, through an outage
// tracker (internal/outage): one warning per outage, once failures have
// lasted a second (a leader moving, or a topic just created, fails one
// attempt and is not worth a warning), and Failing for readiness. In a
// transaction the tracker is the Transaction's, which its own requests
// (AddPartitionsToTxn, EndTxn, the checkpoint's) report to as well: one
// outage is one warning whichever request meets it. Every sender and
// retry reports to it.
type health struct {
	log      *slog.Logger
	observer Observer
	outage   *outage.Tracker
}

// newHealth returns the health of a writer logging to log, reporting to
// tx's tracker when it has one.
func newHealth(log *slog.Logger, observer Observer, tx Transaction) health {
	h := health{log: log, observer: observer, outage: outage.New(log)}
	if tx != nil && tx.Outage() != nil {
		h.outage = tx.Outage()
	}
	return h
}

// failed is called on each failed produce attempt.
func (h *health) failed(err error, msg string, args ...any) {
	h.observer.ProduceFailed(errorKind(err))
	failure := fmt.Errorf(msg, args...)
	if !h.outage.Failed("produce", failure) {
		h.log.Debug("kafka produce failed, retrying", slog.Any("err", failure))
	}
}

// refused is called when the brokers refused a request for what it is
// (the transaction fenced, or past saving): a verdict, not an outage. The
// brokers answered, so it ends any outage instead of starting one: a fenced
// transaction sends nothing more, and no later success would clear it.
func (h *health) refused(err error, msg string, args ...any) {
	h.observer.ProduceFailed(errorKind(err))
	h.outage.Succeeded()
	h.log.Debug("kafka refused a produce request", slog.Any("err", fmt.Errorf(msg, args...)))
}

// unavailable is called on each failed attempt to learn a topic's
// partitions. It ends no outage when it succeeds: brokers that answer
// metadata requests may still refuse produce requests.
func (h *health) unavailable(topic string, err error) {
	h.outage.Failed("metadata", fmt.Errorf("partitions of %s: %w", topic, err))
}

// Failing reports, when requests have failed for at least d with no
// success since (produce requests, or in a transaction any of its
// requests), since when, the request that failed last and its error.
func (w *Writer) Failing(d time.Duration) (since time.Time, request, last string, failing bool) {
	return w.health.outage.Failing(d)
}

// up is called on each success: the outage, if any, is over.
func (h *health) up() { h.outage.Succeeded() }

// salvage settles a batch that kafka-go gave up on. It runs while the
// batch's partition is held busy, so the partition's later batches wait: no
// key's events overtake each other. A transient failure is retried with
// backoff until it succeeds or the writer is abandoned. A permanent one is
// retried message by message, and a message Kafka refuses for what it is
// (too large, an invalid record or topic) is dead-lettered, or fails the
// stream without a dead-letter topic.
//
// Once a message fails for good, the messages after it are not sent but
// reported failed, and salvage returns its error: the caller stops the
// partition, so that nothing after the failed event is published ahead of
// it (it is read again after a restart, and must land first). A message
// dead-lettered has its fate settled, and the others go on.
func (w *Writer) salvage(msgs []kafka.Message, p *partition, perr *Error) (failed error) {
	if !perr.Transient {
		w.log.Warn("kafka refused a batch; sending its messages one by one", slog.String("topic", msgs[0].Topic),
			slog.Int("messages", len(msgs)), slog.Any("err", perr.Err))
	}
	for i := range msgs {
		m, _ := msgs[i].WriterData.(meta)
		if failed != nil {
			p.deliver(w, fate{msgs: msgs[i : i+1], err: heldBack(msgs[i].Topic, failed)})
			continue
		}
		reason, err := m.reason, error(nil)
		if perr.Transient {
			// Each until it is written, so that the batch's own order
			// holds too.
			if err = w.retry(msgs[i], p); err == nil {
				w.health.up()
				w.acked(msgs[i : i+1])
			}
		} else {
			reason, err = w.salvageOne(msgs[i], p, m)
		}
		if errors.Is(err, errQueued) {
			continue // its dead letter's acknowledgement settles it
		}
		failed = err
		p.deliver(w, fate{msgs: msgs[i : i+1], err: err, reason: reason, own: true})
	}
	return failed
}

// salvageOne sends msg alone to partition, and dead-letters it if Kafka
// refuses it for what it is and there is a dead-letter topic. It returns
// msg's fate.
func (w *Writer) salvageOne(msg kafka.Message, p *partition, m meta) (reason string, err error) {
	if err = w.retry(msg, p); err == nil {
		w.acked([]kafka.Message{msg})
		return m.reason, nil
	}
	var one *Error
	if !errors.As(err, &one) || one.Reason == "" || w.cfg.DeadLetterTopic == "" {
		return m.reason, err
	}
	dl := msg // a dead letter already
	if m.reason == "" {
		dl = w.letters.fit(deadLetterOfMessage(&msg, one, m.table, m.lsn))
		dl.Topic = w.cfg.DeadLetterTopic
		if w.transactional() {
			return w.queueDeadLetter(msg.Topic, dl, m, one)
		}
		err = w.retry(dl, nil)
	}
	var again *Error
	if m.reason != "" || errors.As(err, &again) && again.Reason == ReasonMessageTooLarge {
		// The topic's max.message.bytes is below ours: the dead letter
		// goes without its value, a dead letter already to its batch's
		// partition (in a transaction, routing may send it elsewhere now).
		var to *partition
		if m.reason != "" {
			to = p
		}
		err = w.retry(withoutValue(dl, len(dl.Value)), to)
	}
	if err != nil {
		return m.reason, err
	}
	w.counted(msg.Topic, string(msg.Key), one)
	return one.Reason, nil
}

// heldBack is the fate of an event not sent because an earlier one of its
// partition failed for good.
func heldBack(topic string, failed error) error {
	return &Error{Topic: topic, Err: fmt.Errorf("not sent: an earlier event of its partition failed (%w)", failed)}
}

// retry writes msg synchronously, alone, until the write succeeds, fails
// permanently, or the writer is abandoned. Transient failures back off with
// jitter. A message of a salvaged batch goes to the batch's partition (p),
// under its sequence; others (p nil) where routing sends them now.
// The batch's partition is not routing's after the topic grew (a drain,
// or a transaction's old count: inTransactionCount), nor for a null key
// (sticky).
func (w *Writer) retry(msg kafka.Message, p *partition) error {
	for attempt := 0; ; attempt++ {
		var id int
		var err error
		if p != nil {
			id = p.tp.id
		} else {
			id, err = w.partitionOf(w.abandon, &msg)
		}
		if err == nil {
			err = w.produce(msg.Topic, id, []kafka.Message{msg}, p)
		}
		if err == nil {
			return nil
		}
		if terr := w.refusedInTransaction(err); terr != nil {
			return terr
		}
		perr := classify(err)
		perr.Topic = msg.Topic
		if !perr.Transient || w.abandon.Err() != nil {
			return perr
		}
		w.health.failed(err, "produce to %s: %v", msg.Topic, err)
		select {
		case <-time.After(backoff.Delay(attempt, w.backoffMin, w.backoffMax)):
		case <-w.abandon.Done():
			return &Error{Topic: perr.Topic, Err: fmt.Errorf("writer closed while retrying: %w", perr.Err)}
		}
	}
}

// produce sends msgs to one partition in a request of their own, acks=all,
// outside the senders: salvage's one-by-one retries use it while their
// partition (p) is held busy, its messages carrying its sequence. Sent to
// any other partition (p nil: a dead letter), they carry no producer id,
// since that partition's sender, or salvage, may have a batch out with
// the sequence they would need (a duplicate dead letter is allowed, as at
// least once).
func (w *Writer) produce(topic string, id int, msgs []kafka.Message, p *partition) error {
	if err := w.hold(); err != nil {
		return err
	}
	if err := w.ensureSession(); err != nil {
		return err
	}
	tp := topicPartition{topic, id}
	h := producer.NoProducer
	if p != nil {
		h = p.stamp(w.idem.state(w.transactional()))
	} else if w.transactional() {
		return &transactionError{errDeadLetterOutsideTransaction}
	}
	if err := w.enlist([]batch{{p: p}}); err != nil {
		return err
	}
	rs, err := w.encode(h, msgs)
	if err != nil {
		return &Error{Topic: topic, Err: err}
	}
	ctx, cancel := context.WithTimeout(w.abandon, produceTimeout+5*time.Second)
	defer cancel()
	req := &rawproduce.Request{
		Acks: int16(kafka.RequireAll), Timeout: int32(produceTimeout / time.Millisecond),
		Topics: []rawproduce.RequestTopic{{Topic: topic, Partitions: []rawproduce.RequestPartition{{Partition: int32(id), RecordSet: rs}}}},
	}
	if w.transactional() {
		req.TransactionalID = w.cfg.Transaction.TransactionalID()
	}
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, req)
	w.cfg.Observer.Request(1, len(msgs))
	if err != nil {
		return err
	}
	code, ok := answers(res.(*produceAPI.Response))[tp]
	var refused error
	if code != 0 {
		refused = w.refusedInTransaction(kafka.Error(code))
	}
	switch {
	case !ok:
		return fmt.Errorf("no answer for %s/%d: %w", topic, id, protocol.ErrNoPartition)
	case refused != nil:
		return refused
	case code != 0 && p != nil && h.ProducerID >= 0 && fenced(kafka.Error(code)):
		if err := w.refence(p, h, kafka.Error(code)); err != nil {
			return err
		}
		return &Error{Topic: topic, Err: kafka.Error(code), Transient: true} // sent again under its new sequence
	case code != 0:
		return kafka.Error(code)
	}
	if p != nil {
		p.advanced(h, len(msgs))
	}
	return nil
}
