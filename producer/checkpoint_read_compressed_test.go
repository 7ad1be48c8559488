package producer

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReadCheckpointDecodesEveryCodec: ReadCheckpoint decodes record batches itself,
// and a relay's producer may compress its checkpoints with any codec Kafka
// knows. Several records to a batch, so that compression pays and the
// producer keeps it.
func TestReadCheckpointDecodesEveryCodec(t *testing.T) {
	for name, codec := range map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	} {
		t.Run(name, func(t *testing.T) {
			cluster, cl := newCheckpointCluster(t, 1)
			franz, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.TransactionalID("c"),
				kgo.DefaultProduceTopic(ckptTopic), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer franz.Close()
			ctx := context.Background()
			txn := func(commit bool, ends ...pglogrepl.LSN) {
				t.Helper()
				if err := franz.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				var rs []*kgo.Record
				for _, end := range ends {
					rs = append(rs, &kgo.Record{Key: []byte(keyB), Value: at(t, end+100)}, &kgo.Record{Key: []byte(keyA), Value: at(t, end)})
				}
				if err := franz.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if err := franz.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					t.Fatal(err)
				}
			}
			txn(true, 10, 11, 12)
			txn(false, 20, 21, 22)
			got, found, err := cl.ReadCheckpoint(ctx, ckptTopic, keyA)
			if err != nil || !found || got.EndLSN != 12 {
				t.Fatalf("read %s (found %v, %v), want 0/C", got.EndLSN, found, err)
			}
		})
	}
}
