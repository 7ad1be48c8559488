package producer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// A row's partition column naming a partition past the topic's cached count
// is checked against the brokers once more before it is dead-lettered
// (recheck): the topic may have grown since the writer, or kafka-go's
// transport under it (MetadataTTL), cached the count.
const (
	// recheckEvery bounds those lookups to one per topic per interval: a
	// stream of rows naming a partition that does not exist costs a
	// metadata request a second, not one per row.
	recheckEvery = time.Second
	// recheckTimeout bounds one such lookup.
	recheckTimeout = 5 * time.Second
)

// recheck is a topic's latest lookup past every cache.
type recheck struct {
	at   time.Time     // when it was asked
	done chan struct{} // closed once answered
	err  error         // why it failed; read once done is closed
}

// recheck has the brokers asked for topic's partitions past every cache,
// and caches the answer (see learn), unless they were asked less than
// recheckEvery ago: then it waits for that answer instead. It returns nil
// once the cached count is the brokers', or why they could not be asked
// (the caller retries, or fails, as for any lookup). The lookup runs apart,
// owned by the writer and bounded by recheckTimeout, not by ctx (which ends
// at every status deadline): the caller, back with the same event, finds it
// under way or answered. The caller holds its event meanwhile (Produce does
// not return), so nothing of its partition can overtake it.
func (w *Writer) recheck(ctx context.Context, topic string) error {
	r, fresh := w.routes.rechecked(topic, recheckEvery)
	if fresh && !w.index.spawn(w, func() {
		r.err = w.lookupAfresh(topic)
		close(r.done)
	}) {
		r.err = errClosed(topic)
		close(r.done)
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("ask the brokers for %s's partitions: %w", topic, context.Cause(ctx))
	}
}

func isClosed(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// lookupAfresh asks the brokers for topic's partitions past kafka-go's
// metadata cache, and caches the answer. When the topic grew, the
// transport's connections are dropped as well, so that its next requests
// learn the cluster again: kafka-go routes each produce request by its own
// cached metadata, which would refuse the new partitions (and every request
// carrying one of them) until its next refresh.
func (w *Writer) lookupAfresh(topic string) error {
	ctx, cancel := context.WithTimeout(w.abandon, recheckTimeout)
	defer cancel()
	was := w.routes.seenCount(topic)
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, &freshMetadata{topic: topic})
	if err != nil {
		return fmt.Errorf("ask the brokers for %s's partitions: %w", topic, err)
	}
	c, err := w.learn(ctx, topic, res.(*freshMetadata).res)
	if err != nil {
		return fmt.Errorf("ask the brokers for %s's partitions: %w", topic, err)
	}
	if len(c.ids) > was {
		w.client.Transport.(*kafka.Transport).CloseIdleConnections()
		w.log.Info("a row names a partition the topic gained since its count was cached: the brokers' metadata is asked again",
			slog.String("topic", topic), slog.Int("from", was), slog.Int("to", len(c.ids)))
	}
	return nil
}

// freshMetadata is a metadata request for one topic that kafka-go's
// transport sends to a broker instead of answering from its cache, which
// it does for every *metadata.Request: as a protocol.Splitter it is split
// into that one request, sent as it is, and merged back into itself
// holding the answer (a type of its own, so that the transport does not
// take it for its own metadata answer either).
type freshMetadata struct {
	topic string
	res   *metadataAPI.Response // the answer, once merged
}

func (r *freshMetadata) ApiKey() protocol.ApiKey { return protocol.Metadata }

func (r *freshMetadata) Split(protocol.Cluster) ([]protocol.Message, protocol.Merger, error) {
	return []protocol.Message{&metadataAPI.Request{TopicNames: []string{r.topic}}}, r, nil
}

func (r *freshMetadata) Merge(_ []protocol.Message, results []any) (protocol.Message, error) {
	if len(results) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d answers to one request", r.topic, len(results))
	}
	m, err := protocol.Result(results[0])
	if err != nil {
		return nil, err
	}
	res, ok := m.(*metadataAPI.Response)
	if !ok {
		return nil, fmt.Errorf("metadata of %s: answered with %T", r.topic, m)
	}
	return &freshMetadata{topic: r.topic, res: res}, nil
}
