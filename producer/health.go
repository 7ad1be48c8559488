package producer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/outage"
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
	h.observer.ProduceFailed(ErrorKind(err))
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
	h.observer.ProduceFailed(ErrorKind(err))
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

// salvage settles a batch the broker refused for what it is. It runs
// while the batch's partition is held busy (salvaging), so the
// partition's later batches wait: no key's events overtake each other.
// Its messages go one by one, each in a batch of its own at the head of
// the partition's retries, sent by the partition's sender as any retry
// (sendAlone): a transient failure is retried with backoff until it
// succeeds or the writer is abandoned, and a message Kafka refuses for
// what it is (too large, an invalid record or topic) is dead-lettered, or
// fails the stream without a dead-letter topic.
//
// Once a message fails for good, the messages after it are not sent but
// reported failed, and salvage returns its error: the caller stops the
// partition, so that nothing after the failed event is published ahead of
// it (it is read again after a restart, and must land first). A message
// dead-lettered has its fate settled, and the others go on.
func (w *Writer) salvage(b batch) (failed error) {
	p, msgs := b.p, b.msgs
	w.log.Warn("kafka refused a batch; sending its messages one by one", slog.String("topic", p.tp.topic),
		slog.Int("messages", len(msgs)), slog.Any("err", b.err.Err))
	for i := range msgs {
		if failed != nil {
			p.deliver(w, fate{msgs: msgs[i : i+1], err: heldBack(msgs[i].Topic, failed)})
			continue
		}
		reason, err := w.salvageOne(msgs[i], b)
		failed = err
		p.deliver(w, fate{msgs: msgs[i : i+1], err: err, reason: reason, own: true})
	}
	return failed
}

// sendAlone sends msg, a message of b, b's partition's salvaged batch, in
// a batch of its own through the partition's sender (partition.sendAlone),
// and returns its outcome.
func (w *Writer) sendAlone(msg Outgoing, b batch) error {
	done, s := b.p.sendAlone(msg, b.order)
	if s != nil {
		s.signal()
	}
	return <-done
}

// salvageOne sends msg of b alone, and dead-letters it if Kafka refuses
// it for what it is and there is a dead-letter topic. It returns msg's
// fate, for its partition to report in order.
func (w *Writer) salvageOne(msg Outgoing, b batch) (reason string, err error) {
	if err = w.sendAlone(msg, b); err == nil {
		return msg.Reason, nil
	}
	var one *Error
	if !errors.As(err, &one) || one.Reason == "" || w.cfg.DeadLetters == nil {
		return msg.Reason, err
	}
	dl, ok := w.cfg.DeadLetters.Letter(msg, one)
	if !ok {
		return msg.Reason, err
	}
	if msg.Reason != "" {
		// A dead letter already: its topic's max.message.bytes is below
		// ours. Its letter (the caller's: without its value) goes again,
		// to its own partition. It was counted once, when it was decided.
		// Its reason says its value was left out (a salvage's dead letter
		// reports its own event's reason instead: see queueDeadLetter).
		dl.Token, dl.Reason, dl.Commit, dl.Meta, dl.settled = msg.Token, msg.Reason, msg.Commit, msg.Meta, msg.settled
		if err = w.sendAlone(dl, b); err != nil {
			return msg.Reason, err
		}
		return one.Reason, nil
	}
	return w.queueDeadLetter(msg, dl, one)
}

// heldBack is the fate of an event not sent because an earlier one of its
// partition failed for good.
func heldBack(topic string, failed error) error {
	return &Error{Topic: topic, Err: fmt.Errorf("not sent: an earlier event of its partition failed (%w)", failed)}
}
