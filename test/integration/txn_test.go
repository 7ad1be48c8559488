package integration

import (
	"bytes"
	"context"
	byteorder "encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// TestTxnRealBroker runs the transactional protocol of producer.Txn
// against the real broker: a transaction over two partitions committed,
// one aborted; a second instance's Init fences the first while its
// transaction is open (the coordinator answers CONCURRENT_TRANSACTIONS
// until it has aborted it), the first's commit fails with ErrFenced, and
// the second's commits. A read_committed franz-go consumer reads the
// committed records only.
func TestTxnRealBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("txn-%d", time.Now().UnixNano())
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1}}})
	if err != nil || res.Errors[topic] != nil {
		t.Fatalf("create %s: %v %v", topic, err, res)
	}
	waitLeaders(t, topic)

	a, b := newTxnWriter(t, topic), newTxnWriter(t, topic)
	if err := a.Init(ctx); err != nil {
		t.Fatalf("init: %v", err)
	}
	a.transaction(ctx, t, true, "committed")
	a.transaction(ctx, t, false, "aborted")
	if err := a.Begin(); err != nil {
		t.Fatal(err)
	}
	a.add(ctx, t)
	if err := a.produce(ctx, 0, "fenced"); err != nil {
		t.Fatal(err)
	}
	if err := b.Init(ctx); err != nil {
		t.Fatalf("the second instance's init: %v", err)
	}
	if err := a.Commit(ctx); !errors.Is(err, producer.ErrFenced) {
		t.Fatalf("the fenced instance's commit: %v, want ErrFenced", err)
	}
	b.transaction(ctx, t, true, "end")

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(broker.Brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	for !slices.Contains(got[0], "end") || !slices.Contains(got[1], "end") {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed: %q", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)) })
	}
	for p := range int32(2) {
		if want := []string{"committed", "end"}; !slices.Equal(got[p], want) {
			t.Errorf("partition %d: read %q, want %q", p, got[p], want)
		}
	}
}

// txnWriter is a producer.Txn and the caller's duties: a sequence number
// per partition per producer epoch, produce requests with the
// transactional id.
type txnWriter struct {
	*producer.Txn
	topic     string
	transport *kafka.Transport
	addr      net.Addr
	seq       map[int32]int32
	epoch     int16
}

func newTxnWriter(t *testing.T, topic string) *txnWriter {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	addr := kafka.TCP(broker.Brokers)
	txn, err := producer.NewTxn(producer.TxnConfig{Addr: addr, Transport: tr, TransactionalID: topic, Timeout: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return &txnWriter{Txn: txn, topic: topic, transport: tr, addr: addr, seq: map[int32]int32{}, epoch: -1}
}

func (w *txnWriter) add(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := w.AddPartitions(ctx, map[string][]int32{w.topic: {0, 1}}); err != nil {
		t.Fatalf("add partitions: %v", err)
	}
}

// transaction writes value to both partitions in one transaction.
func (w *txnWriter) transaction(ctx context.Context, t *testing.T, commit bool, value string) {
	t.Helper()
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	w.add(ctx, t)
	for p := range int32(2) {
		if err := w.produce(ctx, p, value); err != nil {
			t.Fatal(err)
		}
	}
	end := w.Abort
	if commit {
		end = w.Commit
	}
	if err := end(ctx); err != nil {
		t.Fatalf("end (commit %v): %v", commit, err)
	}
}

func (w *txnWriter) produce(ctx context.Context, partition int32, value string) error {
	if _, epoch := w.Producer(); epoch != w.epoch {
		w.seq, w.epoch = map[int32]int32{}, epoch
	}
	b, err := producer.AppendBatch(make([]byte, 4), w.Header(w.seq[partition]), []producer.Record{{Value: []byte(value)}}, 0)
	if err != nil {
		return err
	}
	byteorder.BigEndian.PutUint32(b, uint32(len(b)-4))
	req := &rawproduce.Request{TransactionalID: w.TransactionalID(), Acks: -1, Timeout: 10_000,
		Topics: []rawproduce.RequestTopic{{Topic: w.topic, Partitions: []rawproduce.RequestPartition{
			{Partition: partition, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b)}}}}}}
	res, err := w.transport.RoundTrip(ctx, w.addr, req)
	if err != nil {
		return fmt.Errorf("produce to %d: %w", partition, err)
	}
	if code := res.(*produceAPI.Response).Topics[0].Partitions[0].ErrorCode; code != 0 {
		return fmt.Errorf("produce to %d: %w", partition, kafka.Error(code))
	}
	w.seq[partition]++
	return nil
}
