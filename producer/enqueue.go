package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
)

// write hands msg to the async writer, retrying while the topic's metadata
// cannot be had. A topic still missing after MissingTopicTimeout yields an
// *Error with ReasonTopicMissing. owned: from a goroutine of the writer's
// own (a salvage), which may queue after Close (see partition.push).
func (w *Writer) write(ctx context.Context, msg Outgoing, owned bool) error {
	if w.missing.known(msg.Topic, w.cfg.MissingTopicTimeout) {
		return &Error{Topic: msg.Topic, Reason: ReasonTopicMissing, Err: fmt.Errorf("topic does not exist (waited %s for it earlier)", w.cfg.MissingTopicTimeout)}
	}
	for attempt := 0; ; attempt++ {
		err := w.enqueue(ctx, msg, owned)
		if err == nil {
			w.missing.found(msg.Topic)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish to %s: %w", msg.Topic, context.Cause(ctx))
		}
		perr := Classify(err)
		perr.Topic = msg.Topic
		if !perr.Transient {
			return perr
		}
		switch {
		case errors.Is(err, kafka.UnknownTopicOrPartition), errors.Is(err, kafka.LeaderNotAvailable):
			// A topic being auto-created answers this way for a moment.
			if w.missing.lost(msg.Topic) >= w.cfg.MissingTopicTimeout {
				return &Error{Topic: msg.Topic, Reason: ReasonTopicMissing,
					Err: fmt.Errorf("topic does not exist after %s (create it, or let the broker auto-create topics)", w.cfg.MissingTopicTimeout)}
			}
			w.log.Debug("topic not ready, retrying", slog.String("topic", msg.Topic), slog.Any("err", err))
		default:
			w.health.unavailable(msg.Topic, err)
		}
		select {
		case <-time.After(backoff.Delay(attempt, w.backoffMin, w.backoffMax)):
		case <-ctx.Done():
			return fmt.Errorf("publish to %s: %w", msg.Topic, context.Cause(ctx))
		}
	}
}

// errClosed is an event handed over once the writer is closed.
func errClosed(topic string) error {
	return &Error{Topic: topic, Err: errors.New("writer closed")}
}

// enqueue routes msg to its partition and queues it there, telling the
// partition leader's sender. It fails when the topic's partitions cannot
// be learned (classified as for a produce). owned: see write.
func (w *Writer) enqueue(ctx context.Context, msg Outgoing, owned bool) error {
	if w.closed.Load() && !owned {
		return errClosed(msg.Topic)
	}
	for {
		epoch := w.routes.epoch.Load()
		c, id, err := w.place(ctx, &msg)
		if err != nil {
			return err
		}
		// Counted until queued, so that no drain ends meanwhile (route);
		// routed by a count changed since, it is routed again.
		w.enqueuing.Add(1)
		if w.routes.epoch.Load() != epoch {
			w.enqueuing.Add(-1)
			continue
		}
		p := w.index.partition(topicPartition{msg.Topic, id})
		s, full, err := p.push(w, msg, c.leaders[id], c.at, owned)
		w.enqueuing.Add(-1)
		if err != nil {
			return err
		}
		s.enqueued(full)
		return nil
	}
}

// route returns the partitions and leaders to route topic's next event
// by. While a drain is pending (the count changed) it waits until no
// partition of the topic holds anything, so that one key's events are not
// split across two partitions out of order; then the new count is used.
// It never routes by a count older than the last one seen, but in the
// open transaction of a transactional writer (inTransactionCount); named:
// the row names its partition, which no count moves.
func (w *Writer) route(ctx context.Context, topic string, named bool) (topicCount, error) {
	for {
		c, d, err := w.partitionIDs(ctx, topic)
		if err != nil {
			return topicCount{}, err
		}
		if old, held := w.inTransactionCount(topic, c, d); held {
			if named {
				return c, nil // the drain stays for the keyed rows
			}
			return old, nil
		}
		// No event is between its routing and its queue (enqueuing) and
		// none is queued: nothing routed by the old count is left.
		if d.on && w.enqueuing.Load() == 0 && !w.topicBusy(topic) && w.routes.drained(topic, d.gen) {
			c, d, err = w.partitionIDs(ctx, topic)
			if err != nil {
				return topicCount{}, err
			}
		}
		if !d.on && len(c.ids) == d.seen {
			return c, nil
		}
		if !d.on {
			continue // c predates a newer count that was forgotten since: ask again
		}
		select {
		case <-ctx.Done():
			return topicCount{}, fmt.Errorf("wait for %s's events queued under its old partition count: %w", topic, context.Cause(ctx))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// place routes msg's topic (see route) and returns its partition. A
// partition named by the row and out of range is asked again once, after
// the brokers are asked past every cache (recheck): the topic may have
// just grown. msg waits meanwhile (its Produce does not return), so
// nothing after it overtakes it.
func (w *Writer) place(ctx context.Context, msg *Outgoing) (topicCount, int, error) {
	for fresh := false; ; fresh = true {
		c, err := w.route(ctx, msg.Topic, msg.Partition != "")
		if err != nil {
			return topicCount{}, 0, err
		}
		id, err := w.routes.pick(msg, c.ids)
		if err == nil {
			return c, id, nil
		}
		var perr *Error
		if fresh || !errors.As(err, &perr) || perr.Reason != ReasonPartitionOutOfRange {
			return topicCount{}, 0, err
		}
		if err := w.recheck(ctx, msg.Topic); err != nil { // past every cache (recheck.go)
			return topicCount{}, 0, err
		}
	}
}

// topicBusy reports whether any partition of topic holds anything
// (partition.pending).
func (w *Writer) topicBusy(topic string) bool {
	busy := false
	w.index.each(topic, func(p *partition) bool {
		busy = !p.drained()
		return !busy
	})
	return busy
}

// batchOverhead is a record's framing in a batch, roughly, on top of its
// key, value and headers.
const batchOverhead = 64

// recordSize is a record's weight against MaxMessageBytes (Outgoing.Size).
func recordSize(m *Outgoing) int { return m.Size() }

// missingTopics remembers since when each topic has been missing, across
// calls of write: a call is cut short at every status deadline and made
// again. A topic missing for longer than the timeout is reported at once for
// another minute, so that its events do not each wait the timeout out.
type missingTopics struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// lost records topic as missing and returns for how long it has been.
func (m *missingTopics) lost(topic string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.since[topic]
	if !ok {
		if len(m.since) >= 1024 {
			clear(m.since)
		}
		since = time.Now()
		m.since[topic] = since
	}
	return time.Since(since)
}

// known reports whether topic has been missing for over timeout, and not
// for so long that it is worth asking again.
func (m *missingTopics) known(topic string, timeout time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.since[topic]
	if ok && time.Since(since) > timeout+time.Minute {
		delete(m.since, topic)
		return false
	}
	return ok && time.Since(since) >= timeout
}

func (m *missingTopics) found(topic string) {
	m.mu.Lock()
	delete(m.since, topic)
	m.mu.Unlock()
}
