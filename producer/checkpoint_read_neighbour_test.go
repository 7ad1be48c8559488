package producer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slowFetches adds delay to every Fetch and ListOffsets the cluster answers
// (a broker in another zone, behind TLS) and returns the count of fetches.
func slowFetches(cluster *kfake.Cluster, delay time.Duration) *atomic.Int64 {
	var fetches atomic.Int64
	for _, key := range []kmsg.Key{kmsg.Fetch, kmsg.ListOffsets} {
		cluster.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			cluster.KeepControl()
			if key == kmsg.Fetch {
				fetches.Add(1)
			}
			time.Sleep(delay)
			return nil, nil, false
		})
	}
	return &fetches
}

// bulk writes n committed records under key in transactions of perTxn, in
// large batches, uncompressed: a busy neighbour's uncompacted tail, as many
// bytes as its own small transactions would take, written fast.
func bulk(t *testing.T, cluster *kfake.Cluster, key string, n, perTxn int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.TransactionalID("bulk"),
		kgo.DefaultProduceTopic(ckptTopic), kgo.ProducerBatchMaxBytes(512<<10), kgo.ProducerLinger(50*time.Millisecond),
		kgo.MaxBufferedRecords(perTxn+1), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := at(t, 0x1000000)
	ctx := context.Background()
	for done := 0; done < n; done += perTxn {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var failed atomic.Pointer[error]
		for range min(perTxn, n-done) {
			cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		if err := failed.Load(); err != nil {
			t.Fatalf("produce: %v", *err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// TestReadCheckpointBehindABusyNeighbour: another slot sharing the checkpoint
// partition has committed 200,000 records since this slot's last one, and
// every round trip to the broker takes 20 ms. ReadCheckpoint must find the slot's
// record in a bounded number of fetches, whatever the neighbour wrote: a
// relay's open gives it 20 s.
func TestReadCheckpointBehindABusyNeighbour(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 records to kfake: not a -short test")
	}
	const maxFetches = 25
	tests := []struct {
		name  string
		write func(t *testing.T, cluster *kfake.Cluster, a *franzProducer)
		want  pglogrepl.LSN // 0: no checkpoint
	}{
		{"the slot's record before the neighbour's", func(t *testing.T, cluster *kfake.Cluster, a *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			bulk(t, cluster, keyB, 200_000, 20_000)
		}, 10},
		{"aborted ones of the slot among the neighbour's", func(t *testing.T, cluster *kfake.Cluster, a *franzProducer) {
			a.txn(true, keyA, at(t, 10))
			a.txn(false, keyA, at(t, 11))
			bulk(t, cluster, keyB, 100_000, 20_000)
			a.txn(true, keyA, at(t, 20))
			a.begin()
			a.put(keyA, at(t, 30))
			bulk(t, cluster, keyB, 100_000, 20_000)
			a.put(keyA, at(t, 31))
			a.end(false)
		}, 20},
		{"no record of the slot", func(t *testing.T, cluster *kfake.Cluster, a *franzProducer) {
			a.txn(false, keyA, at(t, 11))
			bulk(t, cluster, keyB, 200_000, 20_000)
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster, cl := newCheckpointCluster(t, 1)
			tt.write(t, cluster, newProducer(t, cluster, "a"))
			fetches := slowFetches(cluster, 20*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got, found, err := cl.ReadCheckpoint(ctx, ckptTopic, keyA)
			n := fetches.Load()
			if err != nil {
				t.Fatalf("read after %d fetches: %v", n, err)
			}
			if found != (tt.want != 0) || got.EndLSN != tt.want {
				t.Fatalf("read %s (found %v) in %d fetches, want %s (found %v)", got.EndLSN, found, n, tt.want, tt.want != 0)
			}
			if n > maxFetches {
				t.Fatalf("read in %d fetches, want at most %d", n, maxFetches)
			}
			t.Log(fmt.Sprintf("%d fetches", n))
		})
	}
}
