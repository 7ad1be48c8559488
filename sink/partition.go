package sink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// partition accumulates one topic partition's messages and sends them from
// its own goroutine, one produce request at a time.
type partition struct {
	w     *Writer
	tp    topicPartition
	wake  chan struct{} // a message arrived, or the writer is closing
	mu    sync.Mutex
	buf   []kafka.Message
	first time.Time // when buf's oldest message arrived
	done  bool      // closing: send what is left, then stop
}

var balancer = &kafka.Murmur2Balancer{}

// enqueue routes msg to its partition and queues it there. It fails when
// the topic's partitions cannot be learned (classified as for a produce).
func (w *Writer) enqueue(ctx context.Context, msg kafka.Message) error {
	if w.closed.Load() {
		return &Error{Topic: msg.Topic, Err: errors.New("writer closed")}
	}
	id, err := w.partitionOf(ctx, &msg)
	if err != nil {
		return err
	}
	tp := topicPartition{msg.Topic, id}
	w.mu.Lock()
	p, ok := w.partitions[tp]
	if !ok {
		p = &partition{w: w, tp: tp, wake: make(chan struct{}, 1)}
		w.partitions[tp] = p
		w.owned.Go(p.run)
	}
	w.mu.Unlock()
	p.mu.Lock()
	if len(p.buf) == 0 {
		p.first = time.Now()
	}
	p.buf = append(p.buf, msg)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

// partitionOf returns the partition of msg's key in its topic, as the Java
// client would choose it (murmur2 over the partition count).
func (w *Writer) partitionOf(ctx context.Context, msg *kafka.Message) (int, error) {
	parts, err := w.partitionIDs(ctx, msg.Topic)
	if err != nil {
		return 0, err
	}
	return balancer.Balance(*msg, parts...), nil
}

// partitionIDs returns the partitions of topic (0 to n-1), asking the
// broker (and letting it auto-create the topic if configured) at most once
// a minute per topic.
//
// Only the first lookup of a topic makes the caller wait; a stale entry is
// refreshed in the background meanwhile. The lookup is not bounded by the
// caller's context, which ends at every status deadline (20 ms): under load
// a metadata round trip can take longer, and would never complete.
func (w *Writer) partitionIDs(ctx context.Context, topic string) ([]int, error) {
	w.mu.Lock()
	c, ok := w.counts[topic]
	refresh := ok && time.Since(c.at) >= countTTL && !c.refreshing
	if refresh {
		c.refreshing = true
		w.counts[topic] = c
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
		return c.ids, nil
	}
	lookupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return w.lookup(lookupCtx, topic)
}

// lookup asks the broker for topic's partitions and caches them.
func (w *Writer) lookup(ctx context.Context, topic string) ([]int, error) {
	transport := w.client.Transport
	if transport == nil {
		transport = kafka.DefaultTransport
	}
	res, err := transport.RoundTrip(ctx, w.client.Addr, &metadataAPI.Request{
		TopicNames: []string{topic}, AllowAutoTopicCreation: w.cfg.AutoCreateTopics,
	})
	if err != nil {
		return nil, err
	}
	for _, t := range res.(*metadataAPI.Response).Topics {
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, kafka.Error(t.ErrorCode)
		}
		if len(t.Partitions) == 0 {
			return nil, kafka.LeaderNotAvailable
		}
		ids := make([]int, len(t.Partitions))
		for i := range ids {
			ids[i] = i
		}
		w.mu.Lock()
		w.counts[topic] = topicCount{ids: ids, at: time.Now()}
		w.mu.Unlock()
		return ids, nil
	}
	return nil, kafka.UnknownTopicOrPartition
}

// produce sends msgs to one partition in one request, acks=all.
func (w *Writer) produce(topic string, id int, msgs []kafka.Message) error {
	records := make([]kafka.Record, len(msgs))
	for i := range msgs {
		records[i] = kafka.Record{Time: msgs[i].Time, Key: kafka.NewBytes(msgs[i].Key), Value: kafka.NewBytes(msgs[i].Value), Headers: msgs[i].Headers}
	}
	ctx, cancel := context.WithTimeout(w.abandon, produceTimeout)
	defer cancel()
	res, err := w.client.Produce(ctx, &kafka.ProduceRequest{
		Topic: topic, Partition: id, RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(records...),
	})
	if err != nil {
		return err
	}
	if res.Error != nil {
		return res.Error
	}
	return nil
}

func (p *partition) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run sends the partition's messages until the writer closes and nothing is
// left. A request goes as soon as the previous one is answered, after at
// most BatchTimeout for more messages to join a small batch.
func (p *partition) run() {
	for {
		batch, last := p.take()
		if len(batch) > 0 {
			p.send(batch)
		}
		if last {
			return
		}
	}
}

// take waits for messages and returns the next batch, and whether the
// partition is closing with nothing else left.
func (p *partition) take() ([]kafka.Message, bool) {
	for {
		p.mu.Lock()
		n, done, first := len(p.buf), p.done, p.first
		p.mu.Unlock()
		if n == 0 && done {
			return nil, true
		}
		if n == 0 {
			<-p.wake
			continue
		}
		if wait := p.w.cfg.BatchTimeout - time.Since(first); n < p.w.cfg.BatchSize && !done && wait > 0 {
			select {
			case <-p.wake:
				continue // more arrived: full yet?
			case <-time.After(wait):
			}
		}
		p.mu.Lock()
		size, count := 0, 0
		for count < len(p.buf) && count < p.w.cfg.BatchSize {
			m := &p.buf[count]
			size += recordSize(m) + 64
			if count > 0 && size > p.w.batchBytes {
				break
			}
			count++
		}
		batch := make([]kafka.Message, count)
		copy(batch, p.buf)
		rest := copy(p.buf, p.buf[count:])
		clear(p.buf[rest:])
		p.buf = p.buf[:rest]
		p.first = time.Now()
		p.mu.Unlock()
		return batch, false
	}
}

// send delivers one batch: retried whole while the failure is transient,
// settled message by message (see salvage) when it is not.
func (p *partition) send(batch []kafka.Message) {
	w := p.w
	for attempt := 0; ; attempt++ {
		err := w.produce(p.tp.topic, p.tp.id, batch)
		if err == nil {
			w.up()
			w.acked(batch)
			for i := range batch {
				m := batch[i].WriterData.(meta)
				w.done(m.token, m.dead, nil)
			}
			return
		}
		perr := classify(err)
		perr.Topic = p.tp.topic
		if !perr.Retriable {
			w.salvage(batch, perr)
			return
		}
		if w.abandon.Err() != nil {
			for i := range batch {
				m := batch[i].WriterData.(meta)
				w.done(m.token, m.dead, fmt.Errorf("writer closed while retrying: %w", perr))
			}
			return
		}
		if errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable) {
			w.forget(p.tp.topic)
		}
		w.produceFailed(err, "produce %d messages to %s/%d (attempt %d): %v", len(batch), p.tp.topic, p.tp.id, attempt, err)
		select {
		case <-time.After(jitter(attempt)):
		case <-w.abandon.Done():
		}
	}
}

// forget drops what is cached about topic, so that the next lookup asks
// the broker.
func (w *Writer) forget(topic string) {
	w.mu.Lock()
	delete(w.counts, topic)
	w.mu.Unlock()
}

// jitter returns a capped exponential backoff with full jitter.
func jitter(attempt int) time.Duration {
	d := backoffMin << min(attempt, 6)
	if d > 5*time.Second {
		d = 5 * time.Second
	}
	return d/2 + rand.N(d/2+1)
}

// recordSize is a record's weight against MaxMessageBytes.
func recordSize(m *kafka.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
