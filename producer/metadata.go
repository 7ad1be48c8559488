package producer

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// partitionIDs returns the partitions of topic (0 to n-1) and their
// leaders, with its drain (routes.look), asking the broker (and letting it
// auto-create the topic if configured) at most once a minute per topic.
//
// Only the first lookup of a topic makes the caller wait; a stale entry is
// refreshed in the background meanwhile. The lookup is not bounded by the
// caller's context, which ends at every status deadline (20 ms): under load
// a metadata round trip can take longer, and would never complete.
func (w *Writer) partitionIDs(ctx context.Context, topic string) (topicCount, drain, error) {
	ttl := w.cfg.MetadataMaxAge
	if ttl <= 0 {
		ttl = countTTL
	}
	c, d, ok, refresh := w.routes.look(topic, ttl)
	if refresh {
		w.index.spawn(w, func() {
			ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
			defer cancel()
			if _, err := w.lookup(ctx, topic); err != nil {
				w.routes.forget(topic) // the next event asks again, and waits
			}
		})
	}
	if ok {
		return c, d, nil
	}
	lookupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	looked, err := w.lookup(lookupCtx, topic)
	if err != nil {
		return topicCount{}, drain{}, err
	}
	if c, d, ok, _ = w.routes.look(topic, ttl); !ok { // else what lookups learned since
		c = looked
	}
	return c, d, nil
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
			spec, ok := w.routes.spec(topic)
			if !ok {
				spec = w.cfg.TopicSpec
			}
			if err := CreateTopic(ctx, w.client, topic, spec); err != nil {
				return topicCount{}, err
			}
			w.log.Info("created topic", slog.String("topic", topic), slog.String("spec", spec.String()))
			return topicCount{}, kafka.LeaderNotAvailable // its leaders are being elected
		}
		c, err := countOf(t)
		if err != nil {
			return topicCount{}, err
		}
		addrs := make(map[int32]string, len(res.Brokers))
		for _, b := range res.Brokers {
			addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		w.index.learnAddrs(addrs)
		if n, changed := w.routes.learned(topic, c); changed {
			w.log.Warn("the topic's partition count changed: events queued under the old count are delivered first (exactly-once: the open Kafka transaction commits first), then keys are routed by the new one",
				slog.String("topic", topic), slog.Int("from", n), slog.Int("to", len(c.ids)))
			w.cfg.Observer.PartitionsChanged(topic)
		}
		// Partitions whose leader moved follow it to its sender.
		for id, leader := range c.leaders {
			if p, ok := w.index.found(topicPartition{topic, id}); ok {
				p.follow(w, leader, c.at)
			}
		}
		return c, nil
	}
	return topicCount{}, kafka.UnknownTopicOrPartition
}

// countOf returns a metadata answer's partitions of one topic and their
// leaders, or why they cannot be used yet.
func countOf(t metadataAPI.ResponseTopic) (topicCount, error) {
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
		if p.PartitionIndex < 0 || int(p.PartitionIndex) >= len(c.leaders) || p.LeaderID < 0 {
			return topicCount{}, kafka.LeaderNotAvailable
		}
		c.leaders[p.PartitionIndex] = p.LeaderID
	}
	return c, nil
}
