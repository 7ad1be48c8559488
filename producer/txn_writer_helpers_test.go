package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional writer's tests: a Txn begun as the relay begins it,
// the writer in it, and what the cluster and a consumer see.

// begunTxn returns a Txn for id, initialised (fencing any earlier
// holder of id) and with a transaction begun, as the relay hands it to its
// writer.
func begunTxn(ctx context.Context, t *testing.T, cluster *kfake.Cluster, id string) *Txn {
	t.Helper()
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	txn, err := NewTxn(TxnConfig{Addr: kafka.TCP(cluster.ListenAddrs()...), Transport: tr, TransactionalID: id,
		Timeout: 30 * time.Second, RetryBackoff: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(); err != nil {
		t.Fatal(err)
	}
	return txn
}

// txnWriter starts a writer to topic whose fates go to o; cfg adds the
// Transaction, BatchTimeout and the rest.
func writerInTxn(cluster *kfake.Cluster, topic string, cfg testConfig, o *outcomes) *testWriter {
	cfg.Brokers, cfg.MissingTopicTimeout = cluster.ListenAddrs(), 10*time.Second
	cfg.Topic = topic
	return newTestWriter(cfg, o.done)
}

// publishTo publishes one event to partition per value (the row's
// partition column), with tokens from *token on, and waits until every
// fate asked for so far is in.
func publishTo(ctx context.Context, t *testing.T, w *testWriter, o *outcomes, token *uint64, partition int, values ...string) []uint64 {
	t.Helper()
	var tokens []uint64
	for _, v := range values {
		ev := &event{ID: fmt.Sprint(*token), AggregateType: "t", AggregateID: "k", EventType: "e",
			Partition: fmt.Sprint(partition), Payload: []byte(v)}
		if err := w.Publish(ctx, ev, *token); err != nil {
			t.Fatalf("publish %d: %v", *token, err)
		}
		tokens = append(tokens, *token)
		*token++
	}
	o.wait(ctx, t, int(*token))
	return tokens
}

// checkFates checks that each of tokens has one fate: acknowledged when
// want is nil, else failed with an error wrapping want and the transaction
// error type (failed as it is: neither retried nor salvaged).
func checkFates(t *testing.T, o *outcomes, want error, tokens ...uint64) {
	t.Helper()
	for _, tok := range tokens {
		f, _ := o.get(tok)
		switch {
		case f.times != 1:
			t.Errorf("event %d: %d fates reported, want 1", tok, f.times)
		case want == nil && f.err != nil:
			t.Errorf("event %d failed: %v", tok, f.err)
		case want != nil && (!errors.Is(f.err, want) || !errors.As(f.err, new(*TransactionError))):
			t.Errorf("event %d: fate %v, want a transaction error wrapping %q", tok, f.err, want)
		case f.reason != "":
			t.Errorf("event %d dead-lettered (%s)", tok, f.reason)
		}
	}
}

// partitionKey is a topic's partition, as the fake cluster sees it.
type partitionKey struct {
	topic string
	id    int
}

// txnTraffic counts what a fake cluster receives: produce batches by
// producer epoch and partition, and AddPartitionsToTxn requests by epoch.
type txnTraffic struct {
	mu      sync.Mutex
	batches map[int16]map[partitionKey]int
	adds    map[int16]int
}

func watchTxnTraffic(cluster *kfake.Cluster) *txnTraffic {
	tt := &txnTraffic{batches: map[int16]map[partitionKey]int{}, adds: map[int16]int{}}
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		tt.mu.Lock()
		defer tt.mu.Unlock()
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if b.ReadFrom(rp.Records) != nil {
					continue
				}
				if tt.batches[b.ProducerEpoch] == nil {
					tt.batches[b.ProducerEpoch] = map[partitionKey]int{}
				}
				tt.batches[b.ProducerEpoch][partitionKey{rt.Topic, int(rp.Partition)}]++
			}
		}
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.AddPartitionsToTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.AddPartitionsToTxnRequest)
		tt.mu.Lock()
		defer tt.mu.Unlock()
		tt.adds[r.ProducerEpoch]++
		for _, x := range r.Transactions { // v4+
			tt.adds[x.ProducerEpoch]++
		}
		return nil, nil, false
	})
	return tt
}

// of returns the produce batches of epoch by partition, and its
// AddPartitionsToTxn requests.
func (tt *txnTraffic) of(epoch int16) (map[partitionKey]int, int) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	b := map[partitionKey]int{}
	for tp, n := range tt.batches[epoch] {
		b[tp] = n
	}
	return b, tt.adds[epoch]
}

// topic returns the produce batches to topic, of every producer.
func (tt *txnTraffic) topic(name string) int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	n := 0
	for _, ps := range tt.batches {
		for tp, c := range ps {
			if tp.topic == name {
				n += c
			}
		}
	}
	return n
}

// fateWithin waits up to d for token's fate; false when d passed first.
func fateWithin(t *testing.T, o *outcomes, token uint64, d time.Duration) bool {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if f, ok := o.get(token); ok {
			if f.err != nil {
				t.Fatalf("event %d failed: %v", token, f.err)
			}
			return true
		}
		select {
		case <-o.changed:
		case <-timer.C:
			return false
		}
	}
}

// consume reads topic from its start, read_committed or read_uncommitted,
// until enough says it has what it needs, and returns the records by
// partition. The test fails when 15 s pass first.
func consume(ctx context.Context, t *testing.T, cluster *kfake.Cluster, topic string, committed bool,
	enough func(map[int32][]*kgo.Record) bool) map[int32][]*kgo.Record {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	got := map[int32][]*kgo.Record{}
	for !enough(got) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s (read_committed %v): what is expected never came; read %d partitions", topic, committed, len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}
	return got
}

// values returns the values of records.
func values(records []*kgo.Record) []string {
	out := make([]string, len(records))
	for i, r := range records {
		out[i] = string(r.Value)
	}
	return out
}
