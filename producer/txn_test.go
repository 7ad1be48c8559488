package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const txnTopic = "txn"

// newCluster starts a kfake cluster of n brokers with txnTopic (2
// partitions).
func newCluster(t *testing.T, n int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.SeedTopics(2, txnTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// txnWriter is a Txn and the caller's duties around it: sequence numbers
// per partition per producer epoch, and produce requests carrying the
// transactional id.
type txnWriter struct {
	*Txn
	transport *kafka.Transport
	seq       map[int32]int32
	epoch     int16
}

func newWriter(t *testing.T, c *kfake.Cluster, id string) *txnWriter {
	t.Helper()
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	addr := kafka.TCP(c.ListenAddrs()...)
	txn, err := NewTxn(TxnConfig{Addr: addr, Transport: tr, TransactionalID: id, Timeout: 30 * time.Second,
		RetryBackoff: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &txnWriter{Txn: txn, transport: tr, seq: map[int32]int32{}, epoch: -1}
}

// ready returns a writer whose Init succeeded.
func ready(ctx context.Context, t *testing.T, c *kfake.Cluster, id string) *txnWriter {
	t.Helper()
	w := newWriter(t, c, id)
	if err := w.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// begun returns a writer with a transaction open, and the epoch its Init
// got. With values, the transaction holds partition 0 and a batch of
// values in it.
func begun(ctx context.Context, t *testing.T, c *kfake.Cluster, id string, values ...string) (*txnWriter, int16) {
	t.Helper()
	w := ready(ctx, t, c, id)
	_, epoch := w.Producer()
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	if len(values) == 0 {
		return w, epoch
	}
	if err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {0}}); err != nil {
		t.Fatal(err)
	}
	if err := w.produce(ctx, 0, values...); err != nil {
		t.Fatal(err)
	}
	return w, epoch
}

// produce sends values as one transactional batch to partition and
// returns the partition's error.
func (w *txnWriter) produce(ctx context.Context, partition int32, values ...string) error {
	if _, epoch := w.Producer(); epoch != w.epoch {
		w.seq, w.epoch = map[int32]int32{}, epoch
	}
	records := make([]Record, len(values))
	for i, v := range values {
		records[i] = Record{Value: []byte(v)}
	}
	b, err := AppendBatch(make([]byte, 4), w.Header(w.seq[partition]), records, 0)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	req := &rawproduce.Request{TransactionalID: w.TransactionalID(), Acks: -1, Timeout: 10_000,
		Topics: []rawproduce.RequestTopic{{Topic: txnTopic, Partitions: []rawproduce.RequestPartition{
			{Partition: partition, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b)}}}}}}
	res, err := w.transport.RoundTrip(ctx, w.Txn.cfg.Addr, req)
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	if code := res.(*produceAPI.Response).Topics[0].Partitions[0].ErrorCode; code != 0 {
		return fmt.Errorf("produce to %d: %w", partition, kafka.Error(code))
	}
	w.seq[partition] += int32(len(values))
	return nil
}

// transaction runs one transaction writing values[p] to partition p, and
// commits or aborts it.
func (w *txnWriter) transaction(ctx context.Context, t *testing.T, commit bool, values map[int32][]string) {
	t.Helper()
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	parts := map[string][]int32{}
	for p := range values {
		parts[txnTopic] = append(parts[txnTopic], p)
	}
	if err := w.AddPartitions(ctx, parts); err != nil {
		t.Fatalf("add partitions: %v", err)
	}
	for p, vs := range values {
		if !w.Added(txnTopic, p) {
			t.Fatalf("partition %d added but not Added", p)
		}
		if err := w.produce(ctx, p, vs...); err != nil {
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

// readCommitted returns what a read_committed consumer reads from each
// partition of txnTopic, until it has read last in every partition of
// want.
func readCommitted(ctx context.Context, t *testing.T, c *kfake.Cluster, last string, want ...int32) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(txnTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for slices.ContainsFunc(want, func(p int32) bool { return !slices.Contains(got[p], last) }) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed: %q not read in every partition of %v: %v", last, want, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)) })
	}
	return got
}

// count counts the requests of key the cluster receives, without handling
// them.
func count(c *kfake.Cluster, key kmsg.Key) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// TestTxnCommitAndAbort: a committed transaction over two partitions is
// read by a read_committed consumer, an aborted one is not; partitions
// already added are not added again; an empty transaction sends no EndTxn.
func TestTxnCommitAndAbort(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	adds, ends := count(c, kmsg.AddPartitionsToTxn), count(c, kmsg.EndTxn)
	w := ready(ctx, t, c, "commit-abort")
	if id, epoch := w.Producer(); id < 0 || epoch < 0 {
		t.Fatalf("producer %d/%d after Init", id, epoch)
	}
	if h := w.Header(7); !h.Transactional || h.BaseSequence != 7 {
		t.Errorf("header %+v", h)
	}
	w.transaction(ctx, t, true, map[int32][]string{0: {"c1", "c2"}, 1: {"c3"}})
	w.transaction(ctx, t, false, map[int32][]string{0: {"a1"}, 1: {"a2", "a3"}})

	// The same partitions twice: one AddPartitionsToTxn.
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	before := adds.Load()
	for range 2 {
		if err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {0, 1, 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := adds.Load() - before; n != 1 {
		t.Errorf("%d AddPartitionsToTxn requests for partitions added twice, want 1", n)
	}
	for p, v := range []string{"end", "end"} {
		if err := w.produce(ctx, int32(p), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	before = ends.Load()
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil || ends.Load() != before {
		t.Errorf("an empty transaction: %v, %d EndTxn requests, want none", err, ends.Load()-before)
	}
	if err := w.Commit(ctx); err == nil {
		t.Error("Commit without a transaction succeeded")
	}
	// Init again between transactions: the same producer id, the next
	// epoch (KIP-360).
	id, epoch := w.Producer()
	if err := w.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if nid, nepoch := w.Producer(); nid != id || nepoch != epoch+1 {
		t.Errorf("producer %d/%d after a second Init, want %d/%d", nid, nepoch, id, epoch+1)
	}

	got := readCommitted(ctx, t, c, "end", 0, 1)
	want := map[int32][]string{0: {"c1", "c2", "end"}, 1: {"c3", "end"}}
	for p := range want {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("partition %d read %q, want %q", p, got[p], want[p])
		}
	}
}

// TestTxnFenced: instance B's Init fences A, whose open transaction ends
// in ErrFenced (at its commit, or at the abort its refused batch calls
// for); A refuses everything after, Init included; B's transaction
// commits, and only B's records are read.
func TestTxnFenced(t *testing.T) {
	for _, produceAfter := range []bool{false, true} {
		t.Run(fmt.Sprintf("produce after the fence %v", produceAfter), func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t, 1)
			a, b := newWriter(t, c, "shared"), newWriter(t, c, "shared")
			if err := a.Init(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.Begin(); err != nil {
				t.Fatal(err)
			}
			if err := a.AddPartitions(ctx, map[string][]int32{txnTopic: {0}}); err != nil {
				t.Fatal(err)
			}
			if err := a.produce(ctx, 0, "a-before"); err != nil {
				t.Fatal(err)
			}
			if err := b.Init(ctx); err != nil {
				t.Fatal(err)
			}
			aid, aepoch := a.Producer()
			if bid, bepoch := b.Producer(); bid != aid || bepoch <= aepoch {
				t.Fatalf("B's producer %d/%d does not fence A's %d/%d", bid, bepoch, aid, aepoch)
			}
			var err error
			if produceAfter {
				perr := a.produce(ctx, 0, "a-after")
				if perr == nil {
					t.Fatal("A's batch after the fence was accepted")
				}
				if err = a.Refused(perr); !errors.Is(err, ErrFenced) {
					if err = a.Commit(ctx); !errors.Is(err, ErrTxnAbortable) {
						t.Errorf("A's commit after a refused batch: %v, want the abortable error", err)
					}
					err = a.Abort(ctx)
				}
			} else {
				err = a.Commit(ctx)
			}
			var te *TxnError
			if !errors.Is(err, ErrFenced) || !errors.As(err, &te) || !te.Fatal() || te.Retriable() {
				t.Fatalf("A's end: %v, want a fatal ErrFenced", err)
			}
			for name, call := range map[string]func() error{"Init": func() error { return a.Init(ctx) }, "Begin": a.Begin,
				"Abort": func() error { return a.Abort(ctx) }} {
				if err := call(); !errors.Is(err, ErrFenced) {
					t.Errorf("A's %s after the fence: %v, want ErrFenced", name, err)
				}
			}
			b.transaction(ctx, t, true, map[int32][]string{0: {"b"}, 1: {"b"}})
			got := readCommitted(ctx, t, c, "b", 0, 1)
			if !slices.Equal(got[0], []string{"b"}) || !slices.Equal(got[1], []string{"b"}) {
				t.Errorf("read %q, want only B's records", got)
			}
		})
	}
}
