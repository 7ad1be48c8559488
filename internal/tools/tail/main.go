// Command tail prints the messages of Kafka topics, one per line: topic,
// partition, offset, key, headers and value. The demo uses it to show what
// outbox-cdc published; it waits until at least -n messages are there.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka bootstrap broker")
	topics := flag.String("topics", "", "comma-separated topics")
	n := flag.Int("n", 1, "wait until the topics hold at least this many messages")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	if err := tail(*brokers, strings.Split(*topics, ","), *n, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "tail:", err)
		os.Exit(1)
	}
}

func tail(broker string, topics []string, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 10 * time.Second}
	for {
		ends, total, err := testkit.EndOffsets(ctx, client, topics)
		if err == nil && total >= int64(n) {
			return print(ctx, broker, ends)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d messages after %s (last error: %v)", total, n, timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func print(ctx context.Context, broker string, ends map[string]map[int]int64) error {
	var topics []string
	for t := range ends {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, topic := range topics {
		for p := 0; p < len(ends[topic]); p++ {
			if ends[topic][p] == 0 {
				continue
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					r.Close()
					return fmt.Errorf("read %s/%d: %w", topic, p, err)
				}
				var hs []string
				for _, h := range m.Headers {
					hs = append(hs, h.Key+"="+string(h.Value))
				}
				fmt.Printf("%s [%d] @%d key=%s headers={%s} value=%s\n", m.Topic, m.Partition, m.Offset, m.Key, strings.Join(hs, ", "), m.Value)
				if m.Offset >= ends[topic][p]-1 {
					break
				}
			}
			r.Close()
		}
	}
	return nil
}
