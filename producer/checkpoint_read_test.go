package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
)

const ckptTopic = "checkpoints"

// newCheckpointCluster starts a one-broker kfake cluster with the
// checkpoint topic in partitions partitions (none: no topic), and a
// Cluster of it.
func newCheckpointCluster(t *testing.T, partitions int32) (*kfake.Cluster, *Cluster) {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if partitions > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, ckptTopic))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	transport := &kafka.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	return cluster, NewCluster(&kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...), Timeout: 10 * time.Second, Transport: transport})
}

// franzProducer is a franz-go transactional producer: a client independent of
// the kafka-go code under test.
type franzProducer struct {
	t  *testing.T
	cl *kgo.Client
}

func newProducer(t *testing.T, cluster *kfake.Cluster, id string) *franzProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.TransactionalID(id),
		kgo.DefaultProduceTopic(ckptTopic), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &franzProducer{t: t, cl: cl}
}

func (p *franzProducer) begin() {
	p.t.Helper()
	if err := p.cl.BeginTransaction(); err != nil {
		p.t.Fatalf("begin: %v", err)
	}
}

// put writes value under key; a nil value is a tombstone.
func (p *franzProducer) put(key string, value []byte) {
	p.t.Helper()
	if err := p.cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: value}).FirstErr(); err != nil {
		p.t.Fatalf("produce: %v", err)
	}
}

func (p *franzProducer) end(commit bool) {
	p.t.Helper()
	how := kgo.TryAbort
	if commit {
		how = kgo.TryCommit
	}
	if err := p.cl.EndTransaction(context.Background(), how); err != nil {
		p.t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// txn writes one transaction of puts and commits or aborts it.
func (p *franzProducer) txn(commit bool, key string, values ...[]byte) {
	p.t.Helper()
	p.begin()
	for _, v := range values {
		p.put(key, v)
	}
	p.end(commit)
}

// at is the encoded checkpoint of slot s ending at end.
func at(t *testing.T, end pglogrepl.LSN) []byte {
	t.Helper()
	b, err := checkpoint.Record{SystemID: "7312345678901234567", Slot: "s", Timeline: 1, CommitLSN: end - 1, EndLSN: end}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	keyA = checkpoint.Key("7312345678901234567", "s")
	keyB = checkpoint.Key("7312345678901234567", "other")
)

// TestReadCheckpoint writes checkpoints through franz-go transactions, committed
// and aborted, interleaved between two producers, and reads the newest
// committed one for keyA, with a first fetch of any size (1 byte: one batch
// each for the first fetches, which double).
func TestReadCheckpoint(t *testing.T) {
	tests := []struct {
		name       string
		partitions int32
		write      func(a, b *franzProducer)
		want       pglogrepl.LSN // 0: no checkpoint
	}{
		{"committed, then aborted, then another key's", 1, func(a, b *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			a.txn(false, keyA, at(t, 20))
			b.txn(true, keyB, at(t, 30))
		}, 10},
		{"another producer commits inside an aborted transaction", 1, func(a, b *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			a.begin()
			a.put(keyA, at(t, 20))
			b.txn(true, keyA, at(t, 30))
			a.put(keyA, at(t, 40))
			a.end(false)
		}, 30},
		{"aborted, then committed by the same producer", 1, func(a, b *franzProducer) {
			a.txn(false, keyA, at(t, 20), at(t, 21))
			a.txn(true, keyA, at(t, 10))
			a.txn(false, keyA, at(t, 40))
		}, 10},
		{"many transactions, every other aborted", 1, func(a, b *franzProducer) {
			for i := range 40 {
				a.txn(i%2 == 0, keyA, at(t, pglogrepl.LSN(100+i)))
				b.txn(i%3 != 0, keyB, at(t, pglogrepl.LSN(200+i)))
			}
		}, 138},
		{"many windows back, another key's after it", 1, func(a, b *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			for i := range 3 * readWindow {
				b.txn(true, keyB, at(t, pglogrepl.LSN(200+i)))
			}
		}, 10},
		{"an aborted transaction across a window's edge", 1, func(a, b *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			a.begin()
			a.put(keyA, at(t, 20))
			for i := range readWindow {
				b.txn(true, keyB, at(t, pglogrepl.LSN(200+i)))
			}
			a.put(keyA, at(t, 21))
			a.end(false)
			for i := range readWindow / 2 {
				b.txn(true, keyB, at(t, pglogrepl.LSN(400+i)))
			}
		}, 10},
		{"only aborted", 1, func(a, b *franzProducer) { a.txn(false, keyA, at(t, 20)) }, 0},
		{"only another key's", 1, func(a, b *franzProducer) { b.txn(true, keyB, at(t, 30)) }, 0},
		{"an empty topic", 1, func(a, b *franzProducer) {}, 0},
		{"a tombstone resets", 1, func(a, b *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			a.txn(true, keyA, nil)
		}, 0},
		{"a checkpoint after a tombstone", 1, func(a, b *franzProducer) {
			a.txn(true, keyA, nil)
			a.txn(true, keyA, at(t, 10))
		}, 10},
		{"five partitions, placed by franz-go's default partitioner", 5, func(a, b *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			b.txn(true, keyB, at(t, 30))
			a.txn(false, keyA, at(t, 20))
		}, 10},
	}
	for _, tt := range tests {
		for _, maxBytes := range []int32{fetchMaxBytes, 1} {
			t.Run(fmt.Sprintf("%s/fetch %d bytes", tt.name, maxBytes), func(t *testing.T) {
				cluster, cl := newCheckpointCluster(t, tt.partitions)
				tt.write(newProducer(t, cluster, "a"), newProducer(t, cluster, "b"))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				got, found, err := cl.readCheckpoint(ctx, ckptTopic, keyA, maxBytes)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if found != (tt.want != 0) || got.EndLSN != tt.want {
					t.Fatalf("read %s (found %v), want %s (found %v)", got.EndLSN, found, tt.want, tt.want != 0)
				}
			})
		}
	}
}

// TestReadCheckpointWaitsForOpenTransactions: a checkpoint committed after another
// producer's still open transaction lies beyond the last stable offset;
// ReadCheckpoint waits for that transaction's end instead of missing it, and
// says what it waited for when ctx ends first.
func TestReadCheckpointWaitsForOpenTransactions(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("the open one commits %v", commit), func(t *testing.T) {
			cluster, cl := newCheckpointCluster(t, 1)
			a, b := newProducer(t, cluster, "a"), newProducer(t, cluster, "b")
			a.txn(true, keyA, at(t, 10))
			b.begin()
			b.put(keyA, at(t, 20))
			a.txn(true, keyA, at(t, 30))

			short, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			defer cancel()
			if _, _, err := cl.ReadCheckpoint(short, ckptTopic, keyA); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("read with a transaction open: %v, want a deadline error", err)
			}
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				time.Sleep(100 * time.Millisecond)
				b.end(commit)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got, found, err := cl.ReadCheckpoint(ctx, ckptTopic, keyA)
			<-ended
			if err != nil || !found || got.EndLSN != 30 {
				t.Fatalf("read %s (found %v, %v), want 0/1E", got.EndLSN, found, err)
			}
		})
	}
}

func TestReadCheckpointRefuses(t *testing.T) {
	tests := []struct {
		name    string
		value   []byte
		wantErr error
	}{
		{"not a checkpoint", []byte("hello"), checkpoint.ErrBadRecord},
		{"a format from the future", []byte(`{"v":"2.0"}`), checkpoint.ErrUnsupportedVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster, cl := newCheckpointCluster(t, 1)
			p := newProducer(t, cluster, "a")
			p.txn(true, keyA, at(t, 10))
			p.txn(true, keyA, tt.value)
			_, found, err := cl.ReadCheckpoint(context.Background(), ckptTopic, keyA)
			if !errors.Is(err, tt.wantErr) || found {
				t.Fatalf("read: found %v, %v; want %v", found, err, tt.wantErr)
			}
		})
	}
}

func TestReadCheckpointWithoutTopic(t *testing.T) {
	_, cl := newCheckpointCluster(t, 0)
	got, found, err := cl.ReadCheckpoint(context.Background(), ckptTopic, keyA)
	if err != nil || found {
		t.Fatalf("read a missing topic: %+v, found %v, %v; want no checkpoint and no error", got, found, err)
	}
}

// TestKafkaGoFetchKeepsAbortedRecords is why ReadCheckpoint sends its own fetch:
// at read_committed the broker still returns an aborted transaction's
// records (with the list of aborted transactions, for the client to drop
// them), and kafka-go's Client.Fetch passes them on as data and drops the
// list. Should kafka-go start filtering them, this test fails; ReadCheckpoint
// decodes the response itself all the same, to keep its memory bounded (see
// fetch).
func TestKafkaGoFetchKeepsAbortedRecords(t *testing.T) {
	cluster, cl := newCheckpointCluster(t, 1)
	p := newProducer(t, cluster, "a")
	p.txn(true, keyA, at(t, 10))
	p.txn(false, keyA, at(t, 20))
	res, err := cl.client.Fetch(context.Background(), &kafka.FetchRequest{
		Topic: ckptTopic, Partition: 0, Offset: 0, MaxBytes: 1 << 20, IsolationLevel: kafka.ReadCommitted,
	})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch: %v, %v", err, res.Error)
	}
	var ends []pglogrepl.LSN
	for {
		r, err := res.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		v, err := io.ReadAll(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := checkpoint.Decode(v)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, rec.EndLSN)
	}
	if !slices.Equal(ends, []pglogrepl.LSN{10, 20}) {
		t.Fatalf("kafka-go's read_committed Fetch returned checkpoints %v, want [10 20]: the aborted one included", ends)
	}
	if res.LastStableOffset != 4 {
		t.Errorf("last stable offset %d, want 4 (two records, two markers)", res.LastStableOffset)
	}
}
