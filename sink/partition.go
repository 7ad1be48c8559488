package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// partition is one topic partition's queue. Its fields are guarded by the
// writer's mu. Its batches out at once are on one connection, in sequence
// order, and a failed batch is sent again before anything newer of its
// partition (see settle), so a retried batch can never be overtaken by
// later messages of its keys.
type partition struct {
	tp     topicPartition
	leader int32           // the broker whose sender carries this partition
	buf    []kafka.Message // waiting, oldest first
	bytes  int             // their weight against batchBytes
	since  time.Time       // when buf's oldest message was queued, or later (see sender.dueAt)
	// out counts its batches in requests not yet answered, all on
	// outConn (see sender.joins).
	out     int
	outConn *producer.Conn
	// retries are its failed batches, oldest first, each with its
	// sequence: sent again one at a time, alone, before anything newer.
	retries []batch
	attempt int // consecutive failed attempts
	// retryOut: a batch sent again is out; nothing joins it (sender.joins).
	retryOut bool
	retryAt  time.Time // the first retry not before this (backoff)
	// relocate: the first retry failed because the leader moved; once it
	// is due, the leader is asked again (relocating) before it is sent, so
	// that it goes where the leader is by then, not where it was.
	relocate, relocating bool
	// stopped is the failure of an event that could not be published nor
	// dead-lettered: the stream stops at it, so nothing after it in this
	// partition is sent (see salvage); what is queued is reported failed.
	stopped error
	// seq is the partition's producer session and next base sequence
	// (idempotence.go); nil until its first idempotent batch. A batch's
	// sequence is taken when it is first sent; a retry carries the same.
	seq *sequence
	// salvaging: a salvage sends the busy partition's batch message by
	// message (under oneByOne, which it and produce take before mu).
	salvaging bool
	oneByOne  sync.Mutex
	// reports orders the reports of its batches (reports.go); reporting
	// serialises them, taken before mu.
	reports   reports
	reporting sync.Mutex
}

// enqueue routes msg to its partition and queues it there, waking the
// partition leader's sender if it idles. It fails when the topic's
// partitions cannot be learned (classified as for a produce).
func (w *Writer) enqueue(ctx context.Context, msg kafka.Message) error {
	if w.closed.Load() {
		return &Error{Topic: msg.Topic, Err: errors.New("writer closed")}
	}
	c, id, err := w.place(ctx, &msg) // mu held on success
	if err != nil {
		return err
	}
	tp := topicPartition{msg.Topic, id}
	if w.closed.Load() {
		// Checked again under mu: a sender stops, under mu, only once the
		// writer is closed and its partitions are empty, so nothing queued
		// here can be left behind by a stopped sender.
		w.mu.Unlock()
		return &Error{Topic: msg.Topic, Err: errors.New("writer closed")}
	}
	p, ok := w.parts[tp]
	if !ok {
		p = &partition{tp: tp, leader: -1}
		w.parts[tp] = p
	}
	if leader := c.leaders[id]; leader != p.leader {
		w.assign(p, leader)
	}
	if len(p.buf) == 0 {
		p.since = time.Now()
	}
	p.buf = append(p.buf, msg)
	p.bytes += recordSize(&msg) + batchOverhead
	if s := w.senders[p.leader]; s.idle || s.pacing && w.full(p) {
		s.idle, s.pacing = false, false
		s.signal()
	}
	w.mu.Unlock()
	return nil
}

// route returns the partitions and leaders to route topic's next event
// by, with mu held. While a drain is pending (the count changed) it waits
// until no partition of the topic holds anything, so that one key's events
// are not split across two partitions out of order; then the new count is
// used. It never routes by a count older than the last one seen, but in
// the open transaction of a transactional writer (inTransactionCount);
// named: the row names its partition, which no count moves.
func (w *Writer) route(ctx context.Context, topic string, named bool) (topicCount, error) {
	for {
		c, err := w.partitionIDs(ctx, topic)
		if err != nil {
			return topicCount{}, err
		}
		w.mu.Lock()
		if cur, ok := w.routes.counts[topic]; ok {
			c = cur // what lookups learned since
		}
		if old, held := w.inTransactionCount(topic, c); held {
			if named {
				return c, nil // the drain stays for the keyed rows
			}
			return old, nil
		}
		if w.routes.draining[topic] && !w.topicBusy(topic) {
			w.routes.drained(topic)
		}
		draining := w.routes.draining[topic]
		if !draining && len(c.ids) == w.routes.seen[topic] {
			return c, nil
		}
		w.mu.Unlock()
		if !draining {
			continue // c predates a newer count that was forgotten since: ask again
		}
		select {
		case <-ctx.Done():
			return topicCount{}, fmt.Errorf("wait for %s's events queued under its old partition count: %w", topic, context.Cause(ctx))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// place routes msg's topic (see route) and returns its partition, with mu
// held on success. A partition named by the row and out of range is asked
// again once, after the brokers are asked past every cache (recheck): the
// topic may have just grown. msg waits meanwhile (its Publish does not
// return), so nothing after it overtakes it.
func (w *Writer) place(ctx context.Context, msg *kafka.Message) (topicCount, int, error) {
	for fresh := false; ; fresh = true {
		m, _ := msg.WriterData.(meta)
		c, err := w.route(ctx, msg.Topic, m.partition != "")
		if err != nil {
			return topicCount{}, 0, err
		}
		id, err := w.routes.pick(msg, c.ids)
		if err == nil {
			return c, id, nil
		}
		w.mu.Unlock()
		var perr *Error
		if fresh || !errors.As(err, &perr) || perr.Reason != ReasonPartitionOutOfRange {
			return topicCount{}, 0, err
		}
		if err := w.recheck(ctx, msg.Topic); err != nil { // past every cache (recheck.go)
			return topicCount{}, 0, err
		}
	}
}

// assign moves p to leader's sender, starting that sender on first use.
// Called with mu held.
func (w *Writer) assign(p *partition, leader int32) {
	if old, ok := w.senders[p.leader]; ok {
		old.remove(p)
	}
	s, ok := w.senders[leader]
	if !ok || s.stopped {
		s = &sender{w: w, broker: leader, wake: make(chan struct{}, 1), out: make(chan requestOut, w.depth)}
		w.senders[leader] = s
		w.owned.Go(s.run)
		w.owned.Go(s.receive)
	}
	p.leader = leader
	p.outConn = nil // its batches out stay on the old connection: none joins them
	s.parts = append(s.parts, p)
	s.idle, s.pacing = false, false
	s.signal()
}

// partitionOf returns msg's partition in its topic: the one its row names,
// else its key's, as the Java client would choose it (murmur2 over the
// partition count).
func (w *Writer) partitionOf(ctx context.Context, msg *kafka.Message) (int, error) {
	c, err := w.partitionIDs(ctx, msg.Topic)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.routes.pick(msg, c.ids)
}

// partitionIDs returns the partitions of topic (0 to n-1) and their leaders,
// asking the broker (and letting it auto-create the topic if configured) at
// most once a minute per topic.
//
// Only the first lookup of a topic makes the caller wait; a stale entry is
// refreshed in the background meanwhile. The lookup is not bounded by the
// caller's context, which ends at every status deadline (20 ms): under load
// a metadata round trip can take longer, and would never complete.
func (w *Writer) partitionIDs(ctx context.Context, topic string) (topicCount, error) {
	w.mu.Lock()
	c, ok := w.routes.counts[topic]
	ttl := w.cfg.MetadataMaxAge
	if ttl <= 0 {
		ttl = countTTL
	}
	refresh := ok && time.Since(c.at) >= ttl && !c.refreshing
	if refresh {
		c.refreshing = true
		w.routes.counts[topic] = c
	}
	w.mu.Unlock()
	if refresh && !w.closed.Load() {
		w.owned.Go(func() {
			ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
			defer cancel()
			if _, err := w.lookup(ctx, topic); err != nil {
				w.forget(topic) // the next event asks again, and waits
			}
		})
	}
	if ok {
		return c, nil
	}
	lookupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return w.lookup(lookupCtx, topic)
}

// lookup asks for topic's partitions and their leaders and caches them.
// kafka-go's transport answers from its own metadata cache (refreshed every
// few seconds) unless the topic is unknown and may be auto-created.
func (w *Writer) lookup(ctx context.Context, topic string) (topicCount, error) {
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, &metadataAPI.Request{
		TopicNames: []string{topic}, AllowAutoTopicCreation: w.cfg.AutoCreateTopics && !w.cfg.CreateTopics,
	})
	if err != nil {
		return topicCount{}, err
	}
	return w.learn(ctx, topic, res.(*metadataAPI.Response))
}

// learn caches topic's partitions and leaders from res, a metadata answer
// (see lookup, recheck), creating the topic if it is missing and
// CreateTopics says so.
func (w *Writer) learn(ctx context.Context, topic string, res *metadataAPI.Response) (topicCount, error) {
	for _, t := range res.Topics {
		if t.Name != topic {
			continue
		}
		if kafka.Error(t.ErrorCode) == kafka.UnknownTopicOrPartition && w.cfg.CreateTopics {
			w.mu.Lock()
			spec, ok := w.routes.specs[topic]
			w.mu.Unlock()
			if !ok {
				spec = w.cfg.TopicSpec
			}
			if err := createTopic(ctx, w.client, topic, spec); err != nil {
				return topicCount{}, err
			}
			w.log.Info("created topic", slog.String("topic", topic), slog.String("spec", spec.String()))
			return topicCount{}, kafka.LeaderNotAvailable // its leaders are being elected
		}
		if t.ErrorCode != 0 {
			return topicCount{}, kafka.Error(t.ErrorCode)
		}
		if len(t.Partitions) == 0 {
			return topicCount{}, kafka.LeaderNotAvailable
		}
		c := topicCount{ids: make([]int, len(t.Partitions)), leaders: make([]int32, len(t.Partitions)), at: time.Now()}
		for i := range c.ids {
			c.ids[i] = i
		}
		for _, p := range t.Partitions {
			if p.PartitionIndex < 0 || int(p.PartitionIndex) >= len(c.leaders) {
				return topicCount{}, kafka.LeaderNotAvailable
			}
			if p.LeaderID < 0 {
				return topicCount{}, kafka.LeaderNotAvailable
			}
			c.leaders[p.PartitionIndex] = p.LeaderID
		}
		w.mu.Lock()
		for _, b := range res.Brokers {
			w.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if n, changed := w.routes.learned(topic, c); changed {
			w.log.Warn("the topic's partition count changed: events queued under the old count are delivered first (exactly-once: the open Kafka transaction commits first), then keys are routed by the new one",
				slog.String("topic", topic), slog.Int("from", n), slog.Int("to", len(c.ids)))
			w.cfg.Observer.PartitionsChanged(topic)
		}
		// Partitions whose leader moved follow it to its sender.
		for id, leader := range c.leaders {
			if p, ok := w.parts[topicPartition{topic, id}]; ok && p.leader != leader {
				w.assign(p, leader)
			}
		}
		w.mu.Unlock()
		return c, nil
	}
	return topicCount{}, kafka.UnknownTopicOrPartition
}

// busy reports whether p has a batch out, or a salvage holds it.
func (p *partition) busy() bool { return p.out > 0 || p.salvaging }

// take returns p's next batch: its first failed one again (with its
// sequence), or up to BatchSize messages and about batchBytes from its
// queue (stamped when the request is made). Called with mu held, after
// p.out counts the batch.
func (w *Writer) take(p *partition) batch {
	if len(p.retries) > 0 {
		b := p.retries[0]
		p.retries = slices.Delete(p.retries, 0, 1)
		b.err, b.alone, b.retried = nil, p.out == 1, true
		p.retryOut = true
		return b
	}
	size, count := 0, 0
	for count < len(p.buf) && count < w.cfg.BatchSize {
		n := recordSize(&p.buf[count]) + batchOverhead
		if count > 0 && size+n > w.batchBytes {
			break
		}
		size += n
		count++
	}
	p.bytes -= size
	msgs := make([]kafka.Message, count)
	copy(msgs, p.buf)
	rest := copy(p.buf, p.buf[count:])
	clear(p.buf[rest:])
	p.buf = p.buf[:rest]
	if rest > 0 {
		p.since = time.Now() // the rest came later: counted from now, they wait at most a round more
	}
	p.reports.next++
	return batch{p: p, msgs: msgs, h: producer.NoProducer, alone: p.out == 1, order: p.reports.next - 1}
}

// full reports whether p has a full batch waiting: then its sender does not
// wait for more. Called with mu held.
func (w *Writer) full(p *partition) bool {
	return len(p.retries) > 0 || len(p.buf) >= w.cfg.BatchSize || p.bytes > w.batchBytes
}

// batchOverhead is a record's framing in a batch, roughly, on top of its
// key, value and headers.
const batchOverhead = 64

// recordSize is a record's weight against MaxMessageBytes.
func recordSize(m *kafka.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
