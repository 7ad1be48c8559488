package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The engine's tests publish as sink does with its raw envelope: an
// event's key is its aggregate id, its value its payload, its headers its
// id, type and aggregate type. They go through testWriter, the engine
// under one topic, and reach its parts through export_test.go.

// testConfig is a writer to one topic, Topic; with DeadLetterTopic, a
// record the brokers refuse for what it is goes there (testLetters).
type testConfig struct {
	Brokers                           []string
	Topic, DeadLetterTopic            string
	BatchSize, MaxInFlightRequests    int
	BatchTimeout, MissingTopicTimeout time.Duration
	MetadataMaxAge                    time.Duration
	RetryBackoffMin, RetryBackoffMax  time.Duration
	AutoCreateTopics                  bool
	Observer                          Observer
	Transaction                       Transaction
	Logger                            *slog.Logger
	Hold                              func(context.Context)
}

// event is what the tests publish: a row of the outbox, as sink's.
type event struct {
	ID, AggregateType, AggregateID, EventType string
	Payload                                   []byte
	Partition                                 string // the row's partition column; empty: by key
}

// testWriter is the engine under one topic.
type testWriter struct {
	*Writer
	topic    string
	lettered *atomic.Int64 // dead letters written of refused records (testLetters.Lettered)
}

// DeadLettered returns how many refused records' dead letters were
// written, as sink's Writer.DeadLettered counts those.
func (w *testWriter) DeadLettered() int64 { return w.lettered.Load() }

func newTestWriter(cfg testConfig, done Done) *testWriter {
	wc := WriterConfig{Brokers: cfg.Brokers, BatchSize: cfg.BatchSize, BatchTimeout: cfg.BatchTimeout, MaxInFlightRequests: cfg.MaxInFlightRequests,
		MissingTopicTimeout: cfg.MissingTopicTimeout, MetadataMaxAge: cfg.MetadataMaxAge,
		RetryBackoffMin: cfg.RetryBackoffMin, RetryBackoffMax: cfg.RetryBackoffMax, Hold: cfg.Hold,
		AutoCreateTopics: cfg.AutoCreateTopics, Observer: cfg.Observer, Transaction: cfg.Transaction, Logger: cfg.Logger}
	lettered := &atomic.Int64{}
	if cfg.DeadLetterTopic != "" {
		wc.DeadLetters = testLetters{topic: cfg.DeadLetterTopic, lettered: lettered}
	}
	return &testWriter{Writer: NewWriter(wc, done), topic: cfg.Topic, lettered: lettered}
}

// Publish hands ev to the writer under token, as sink's raw envelope.
func (w *testWriter) Publish(ctx context.Context, ev *event, token uint64) error {
	return w.PublishTo(ctx, w.topic, ev, token)
}

// PublishTo hands ev to the writer under token, to topic instead of the
// writer's own (as sink routes by a topic template).
func (w *testWriter) PublishTo(ctx context.Context, topic string, ev *event, token uint64) error {
	var key []byte
	if ev.AggregateID != "" {
		key = []byte(ev.AggregateID)
	}
	hs := []Header{{Key: "id", Value: []byte(ev.ID)}, {Key: "event_type", Value: []byte(ev.EventType)}}
	if ev.AggregateType != "" {
		hs = append(hs, Header{Key: "aggregate_type", Value: []byte(ev.AggregateType)})
	}
	return w.Produce(ctx, Outgoing{Topic: topic, Key: key, Value: ev.Payload, Headers: hs, Partition: ev.Partition, Token: token})
}

// testLetters dead-letters a refused record to topic, with its reason in
// a header; a refused dead letter goes again without its value.
type testLetters struct {
	topic    string
	lettered *atomic.Int64
}

func (l testLetters) Letter(rec Outgoing, refusal *Error) (Outgoing, bool) {
	if rec.Reason != "" {
		rec.Value = nil
		return rec, true
	}
	return Outgoing{Topic: l.topic, Key: rec.Key, Value: rec.Value,
		Headers: append([]Header{{Key: "reason", Value: []byte(refusal.Reason)}}, rec.Headers...)}, true
}

func (l testLetters) Lettered(Outgoing, Outgoing, *Error) { l.lettered.Add(1) }

// newFakeCluster starts a fake Kafka cluster, closed when the test ends.
func newFakeCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

// testContext bounds a test's work against a fake cluster: it ends after d,
// or when the test does.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// besideOthersWhenShort lets a slow test that mostly waits out backoffs
// and sleeps, and whose checks hold on a busy machine (order and counts,
// or durations with seconds of slack), run beside the others under -short,
// where the whole suite must take under a minute.
// The full suite (make test: full sizes, under -race) runs it alone, as it
// was tuned: with them all beside each other there, the transaction
// property's seed 2 once ended "0 keys moved ... the run proves too little"
// (its coin is shared with the fault injectors, so timing changes a run).
func besideOthersWhenShort(t *testing.T) {
	if testing.Short() {
		t.Parallel()
	}
}

// keyedWriter starts a writer to topic for the tests of per-key order under
// faults (publishKeyed, then checkKeyed): batches flushed every 2 ms, fates
// collected for events; cfg adds BatchSize and MetadataMaxAge. Its context
// ends after a minute at the most.
func keyedWriter(t *testing.T, cluster *kfake.Cluster, topic string, events int, cfg testConfig) (context.Context, *testWriter, *fates) {
	t.Helper()
	cfg.Brokers, cfg.BatchTimeout, cfg.MissingTopicTimeout = cluster.ListenAddrs(), 2*time.Millisecond, 10*time.Second
	cfg.Topic = topic
	f := newFates(events)
	return testContext(t, time.Minute), newTestWriter(cfg, f.done), f
}

// checkKeyed waits until every event is acknowledged and closes w
// (fates.wait), then checks each key's order in the acknowledgements
// (checkAckOrder) and in topic's partitions (checkLog, whose counts it
// returns).
func checkKeyed(ctx context.Context, t *testing.T, f *fates, w *testWriter, keys int, cluster *kfake.Cluster, topic string, partitions int) (total, distinct, moved int) {
	t.Helper()
	f.wait(ctx, t, w)
	checkAckOrder(t, f, keys)
	return checkLog(ctx, t, cluster.ListenAddrs(), topic, partitions)
}

// headerOf returns the value of the header key.
func headerOf(hs []kafka.Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// checkLog reads every partition of topic and checks that each key's
// events (payload: its sequence number) first appear in order: within a
// partition, and across partitions, all of a key's first appearances in one
// partition come before those in the next it moved to. It returns the
// records read, the distinct events and how many keys span partitions.
func checkLog(ctx context.Context, t *testing.T, brokers []string, topic string, partitions int) (total, distinct, moved int) {
	t.Helper()
	spans := keySpans{} // key → partition → first appearances
	seen := map[string]bool{}
	for p := range partitions {
		next := map[string]uint32{}
		for _, m := range readPartition(ctx, t, brokers, topic, p) {
			total++
			if id, _ := headerOf(m.Headers, "id"); seen[id] {
				continue
			} else {
				seen[id] = true
			}
			k, n := string(m.Key), binary.BigEndian.Uint32(m.Value)
			if prev, ok := next[k]; ok && n < prev {
				t.Errorf("key %s, partition %d: event %d first written after event %d", k, p, n, prev-1)
			}
			next[k] = n + 1
			spans.add(k, int32(p), n)
		}
	}
	moved = spans.check(func(s string) { t.Error(s) })
	return total, len(seen), moved
}

// keySpans records, for each key, the range of its event numbers each
// partition holds, to check that a key moved to another partition (a
// topic grown) never has its events interleave across the two.
type keySpans map[string]map[int32]*struct{ lo, hi uint32 }

// add records event n of key in partition p.
func (s keySpans) add(key string, p int32, n uint32) {
	if s[key] == nil {
		s[key] = map[int32]*struct{ lo, hi uint32 }{}
	}
	if r := s[key][p]; r == nil {
		s[key][p] = &struct{ lo, hi uint32 }{n, n}
	} else {
		r.lo, r.hi = min(r.lo, n), max(r.hi, n)
	}
}

// check reports each interleaving to problem and returns how many keys
// are in more than one partition.
func (s keySpans) check(problem func(string)) (moved int) {
	for key, ps := range s {
		moved += min(len(ps)-1, 1)
		for p, a := range ps {
			for q, b := range ps {
				if p != q && a.lo < b.lo && a.hi > b.lo {
					problem(fmt.Sprintf("key %s: events %d–%d in partition %d interleave with %d–%d in partition %d", key, a.lo, a.hi, p, b.lo, b.hi, q))
				}
			}
		}
	}
	return moved
}

// producerIDs watches a fake cluster: the InitProducerID requests it
// receives and the producer ids of the batches produced to it.
type producerIDs struct {
	inits   atomic.Int64
	mu      sync.Mutex
	batches map[string]map[int64]int // by topic: batches by producer id (−1: none)
}

func watchProducerIDs(t *testing.T, cluster *kfake.Cluster) *producerIDs {
	ids := &producerIDs{batches: map[string]map[int64]int{}}
	cluster.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		ids.inits.Add(1)
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		ids.mu.Lock()
		defer ids.mu.Unlock()
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rp.Records); err != nil {
					t.Errorf("a batch the writer sent does not decode: %v", err)
				}
				if ids.batches[rt.Topic] == nil {
					ids.batches[rt.Topic] = map[int64]int{}
				}
				ids.batches[rt.Topic][b.ProducerID]++
			}
		}
		return nil, nil, false
	})
	return ids
}

// without returns how many batches to topic carried no producer id.
func (ids *producerIDs) without(topic string) int {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.batches[topic][-1]
}

// idempotent reports whether every batch to topic carried a producer id.
func (ids *producerIDs) idempotent(topic string) bool {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.batches[topic][-1] == 0 && len(ids.batches[topic]) > 0
}

// keyedEvent is event i of a run over keys: its key is k(i%keys) and its
// payload its number within its key (i/keys), which checkLog reads back.
func keyedEvent(i, keys int) *event {
	return &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprintf("k%d", i%keys), EventType: "e",
		Payload: binary.BigEndian.AppendUint32(nil, uint32(i/keys))}
}

// publishKeyed publishes events over keys (keyedEvent), so that checkLog
// can check each key's order.
func publishKeyed(ctx context.Context, t *testing.T, w *testWriter, events, keys int) {
	t.Helper()
	for i := range events {
		if err := w.Publish(ctx, keyedEvent(i, keys), uint64(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// readPartition reads every record of one partition.
func readPartition(ctx context.Context, t *testing.T, brokers []string, topic string, p int) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
	if err != nil {
		t.Fatal(err)
	}
	end, err := conn.ReadLastOffset()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	var out []kafka.Message
	for off := int64(0); off < end; off++ {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read partition %d: %v", p, err)
		}
		out = append(out, m)
	}
	return out
}
