package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// warmBroker produces and consumes records shaped like the relays' for
// about 20 seconds with a client that is neither relay, so that the JVM
// broker's first phase (JIT compilation) penalises no contender.
func (b *bench) warmBroker(ctx context.Context) error {
	topic := fmt.Sprintf("warmup_%d", time.Now().UnixNano()%1e9)
	createTopics(ctx, b.brokers, topic)
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers), kgo.ConsumeTopics(topic), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer client.Close()
	// kafka-go speaks older request versions than franz-go and the Java
	// client: the broker runs other code for them, and both must be warm.
	kw := &kafka.Writer{Addr: kafka.TCP(b.brokers), Topic: topic, RequiredAcks: kafka.RequireAll, Async: true,
		BatchTimeout: 2 * time.Millisecond, Balancer: &kafka.Murmur2Balancer{}}
	defer kw.Close()
	value := []byte(strings.Repeat("v", 300))
	until := time.Now().Add(20 * time.Second)
	sent := 0
	for i := 0; time.Now().Before(until); i++ {
		for j := range 10 {
			key, id := []byte(fmt.Sprintf("agg-%d", (i*10+j)%1000)), []byte(uuid.NewString())
			if i%2 == 0 {
				client.Produce(ctx, &kgo.Record{Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: "id", Value: id}}}, nil)
			} else if err := kw.WriteMessages(ctx, kafka.Message{Key: key, Value: value, Headers: []kafka.Header{{Key: "id", Value: id}}}); err != nil {
				return err
			}
			sent++
		}
		time.Sleep(2 * time.Millisecond)
		if i%50 == 0 {
			pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			client.PollFetches(pctx)
			cancel()
		}
	}
	if err := client.Flush(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "broker warmed up: %d records produced (franz-go and kafka-go) and read in 20 s\n", sent)
	return nil
}
