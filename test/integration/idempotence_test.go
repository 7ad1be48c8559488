package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestLostProduceResponse (issue 25) loses the answers to the relay's
// produce requests after the broker wrote their batches: the relay never
// sees those acks, so the slot stays before the events, and once the
// connection is back the relay sends the same batches again. The
// idempotent producer's sequences let the broker drop the second copy:
// every event is in the topic exactly once, in commit order per aggregate.
func TestLostProduceResponse(t *testing.T) {
	if testkit.Delivery() == "exactly-once" {
		// The cut also keeps the answers to AddPartitionsToTxn, which each
		// Kafka transaction sends before its first batch to a partition:
		// nothing is written during the cut. sink's
		// TestTransactionUnderRandomFaults loses answers to batches the
		// broker wrote (kfake), in transactions.
		t.Skip("at-least-once's idempotence: in exactly-once the cut holds the transaction's AddPartitionsToTxn")
	}
	k, proxy := startProxiedKafka(t)
	direct := directClient(t, k.Brokers, proxy.Addr())
	o := newOutbox(t, "lostack", defaultColumns)
	// Requests paced 3 s apart: the lost transaction, committed within 3 s
	// of the last request, goes whole in the first request after the cut.
	startRelay(t, o.Args(proxy.Addr(), "--batch-timeout", "3s")...)
	topics := []string{o.name + ".order"}
	w, counters := newWritten(), map[string]int{}

	insertRows(t, o, w, makeRows(200, 8, "order", counters), 20)
	// Confirmed, so acknowledged: no answer is outstanding at the cut.
	waitConfirmed(t, o, o.CurrentLSN(t), 30*time.Second)

	if n := proxy.CutResponses(); n == 0 {
		t.Fatalf("no relay connection through the proxy to cut")
	}
	cut := time.Now()
	before := totalMessages(t, direct, topics)
	lost := makeRows(50, 8, "order", counters)
	insertRows(t, o, w, lost, len(lost)) // one transaction: Postgres replays it whole
	end := o.CurrentLSN(t)
	written := waitWrittenUnacked(t, o, direct, topics, before, end)
	t.Logf("responses cut: %d events written by the broker %s after the cut, unacknowledged (slot at %s, their transaction ends by %s)",
		written, time.Since(cut).Round(time.Millisecond), o.Confirmed(t), end)

	proxy.Restore()
	restored := time.Now()
	waitConfirmed(t, o, end, 60*time.Second)
	t.Logf("slot confirmed past the lost transaction %s after the restore", time.Since(restored).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := readDirect(ctx, t, direct, topics)
	checkDelivered(t, o, w, msgs) // each event present as stored, in order per aggregate
	count := map[string]int{}
	for _, m := range msgs {
		id, _ := testkit.Header(m, "id")
		count[id]++
	}
	dups := 0
	for id, n := range count {
		if n > 1 {
			if dups++; dups <= 10 {
				t.Errorf("event %s is in the topic %d times", id, n)
			}
		}
	}
	if dups > 0 {
		t.Errorf("%d of %d events written more than once after a lost produce response", dups, len(w.committed))
	}
	t.Logf("%d events, %d messages in the topic, %d duplicated", len(w.committed), len(msgs), dups)
}

// startProxiedKafka starts a broker of the test's own that advertises a
// proxy in front of it, so that its clients reach it only through the
// proxy, after the first metadata answer too (the package's broker
// advertises itself). Both stop when the test ends.
func startProxiedKafka(t *testing.T) (*testkit.Kafka, *testkit.Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	k, err := testkit.StartKafka("advertised.listeners=PLAINTEXT://" + ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatalf("start a broker advertising the proxy %s: %v", ln.Addr(), err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	p := testkit.ServeProxy(ln, k.Brokers)
	t.Cleanup(p.Close)
	t.Logf("broker %s behind proxy %s, up in %s", k.Brokers, p.Addr(), time.Since(began).Round(time.Millisecond))
	return k, p
}

// directClient talks to broker itself: the metadata names the proxy
// (advertised), which its dial goes around, so it reads while the proxy
// cuts the relay's connections.
func directClient(t *testing.T, broker, advertised string) *kafka.Client {
	t.Helper()
	var d net.Dialer
	tr := &kafka.Transport{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == advertised {
			addr = broker
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(broker), Timeout: 10 * time.Second, Transport: tr}
}

// totalMessages is how many messages topics hold.
func totalMessages(t *testing.T, c *kafka.Client, topics []string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, total, err := testkit.EndOffsets(ctx, c, topics)
	if err != nil {
		t.Fatalf("end offsets of %v: %v", topics, err)
	}
	return total
}

// waitWrittenUnacked waits until topics hold more than before messages
// while the slot is still short of end (the relay saw no ack for them), and
// returns how many were written once their number holds for half a second.
// The relay keeps one request in flight per broker, so what the broker
// wrote is that request's batches.
func waitWrittenUnacked(t *testing.T, o *outbox, c *kafka.Client, topics []string, before int64, end pglogrepl.LSN) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last int64
	var since time.Time
	for {
		total := totalMessages(t, c, topics)
		if confirmed := o.Confirmed(t); confirmed >= end {
			t.Fatalf("slot confirmed %s, past the transaction ending by %s, though no answer reached the relay", confirmed, end)
		}
		if total != last {
			last, since = total, time.Now()
		}
		if total > before && time.Since(since) >= 500*time.Millisecond {
			return total - before
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event of the cut written after 60s (topics hold %d messages, as before the cut)", total)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readDirect returns every message topics hold, from the start, through c.
func readDirect(ctx context.Context, t *testing.T, c *kafka.Client, topics []string) []kafka.Message {
	t.Helper()
	ends, _, err := testkit.EndOffsets(ctx, c, topics)
	if err != nil {
		t.Fatalf("end offsets of %v: %v", topics, err)
	}
	var msgs []kafka.Message
	for topic, parts := range ends {
		for p, end := range parts {
			for off := int64(0); off < end; {
				got, err := fetch(ctx, c, topic, p, off, end)
				if err != nil {
					t.Fatalf("read %s/%d at %d: %v", topic, p, off, err)
				}
				if len(got) == 0 {
					t.Fatalf("read %s/%d at %d: nothing, below its end %d", topic, p, off, end)
				}
				msgs = append(msgs, got...)
				off = got[len(got)-1].Offset + 1
			}
		}
	}
	return msgs
}

// fetch reads one Fetch answer's messages of topic/p from off, below end.
func fetch(ctx context.Context, c *kafka.Client, topic string, p int, off, end int64) ([]kafka.Message, error) {
	res, err := c.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: p, Offset: off, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 500 * time.Millisecond})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, err
	}
	var msgs []kafka.Message
	for {
		r, err := res.Records.ReadRecord()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
		if r.Offset < off || r.Offset >= end { // a batch is fetched whole
			continue
		}
		m := kafka.Message{Topic: topic, Partition: p, Offset: r.Offset, Time: r.Time}
		if m.Key, err = protocol.ReadAll(r.Key); err == nil {
			m.Value, err = protocol.ReadAll(r.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("record at %d: %w", r.Offset, err)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: append([]byte(nil), h.Value...)})
		}
		msgs = append(msgs, m)
	}
}
