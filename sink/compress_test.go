package sink

import (
	"github.com/outbox-cdc/outbox-cdc/producer"

	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestCompressedBatchesReadBack publishes with every codec to the fake
// broker and reads the records back with franz-go, an independent client:
// each codec's batches (lz4 with 64 KiB blocks among them) decode to the
// payloads sent, byte for byte.
func TestCompressedBatchesReadBack(t *testing.T) {
	for _, name := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t.Run(name, func(t *testing.T) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			topic, _ := ParseTopic("events")
			const events = 500
			f := newFates(events)
			w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: topic, BatchSize: 1000, BatchTimeout: time.Millisecond,
				Compression: Compression(name), AutoCreateTopics: true, MissingTopicTimeout: 10 * time.Second}, f.done)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			want := map[string]string{}
			for i := range events {
				// Payloads past 64 KiB now and then, so that lz4 frames hold several blocks.
				payload := fmt.Sprintf(`{"n": %d, "pad": "%0*d"}`, i, 1+(i%7)*15000, 0)
				ev := &decode.Event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprintf("k%d", i%17), EventType: "e", Payload: []byte(payload)}
				want[ev.ID] = payload
				if err := w.Publish(ctx, ev, uint64(i)); err != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
			}
			f.wait(ctx, t, w)
			cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("events"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			got, codecs := 0, map[int8]bool{}
			for got < events && ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					got++
					codecs[int8(r.Attrs.CompressionType())] = true
					if want[string(r.Headers[0].Value)] != string(r.Value) {
						t.Errorf("record %s: payload differs", r.Headers[0].Value)
					}
				})
			}
			if got != events {
				t.Fatalf("read %d of %d records", got, events)
			}
			if !codecs[int8(producer.Codec(Compression(name)))] || len(codecs) != 1 {
				t.Errorf("batches compressed with %v, want only %s (%d)", codecs, name, producer.Codec(Compression(name)))
			}
		})
	}
}
