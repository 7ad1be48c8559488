package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newTopicCluster starts a one-broker kfake cluster with topic t in
// partitions partitions, and a Cluster of it.
func newTopicCluster(t *testing.T, partitions int32) (*kfake.Cluster, *Cluster) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	transport := &kafka.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	return cluster, NewCluster(&kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...), Timeout: 10 * time.Second, Transport: transport})
}

// franzClient is a franz-go client of cluster (independent of the code
// under test) placing records in the partition they name.
func franzClient(t *testing.T, cluster *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readAll reads every partition of topic t from its log start to its end,
// maxBytes a fetch, checking that each read starts where the last left off
// and keeps no more than maxBytes (but one record). It returns the
// messages and the count of reads.
func readAll(ctx context.Context, t *testing.T, c *Cluster, maxBytes int32) ([]Message, int) {
	t.Helper()
	parts, err := c.Partitions(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	offsets, err := c.Offsets(ctx, "t", parts)
	if err != nil {
		t.Fatal(err)
	}
	var out []Message
	reads := 0
	for _, p := range slices.Sorted(slices.Values(parts)) {
		for off := offsets[p].First; off < offsets[p].End; {
			msgs, next, err := c.ReadTopic(ctx, "t", p, off, offsets[p].End, maxBytes)
			reads++
			if err != nil {
				t.Fatalf("read t/%d at %d: %v", p, off, err)
			}
			if next <= off {
				break
			}
			kept := 0
			for _, m := range msgs {
				kept += len(m.Key) + len(m.Value)
				if m.Offset < off || m.Offset >= next || m.Topic != "t" || m.Partition != p {
					t.Fatalf("read t/%d at %d (next %d): a message of %s/%d at %d", p, off, next, m.Topic, m.Partition, m.Offset)
				}
			}
			if len(msgs) > 1 && kept > int(maxBytes) {
				t.Errorf("read t/%d at %d: %d records of %d bytes, asked for %d", p, off, len(msgs), kept, maxBytes)
			}
			out, off = append(out, msgs...), next
		}
	}
	return out, reads
}

// show is what a test compares of a message: everything but its topic.
func show(m Message) string {
	s := fmt.Sprintf("%d/%d %d key=%s value=%s", m.Partition, m.Offset, m.Time.UnixMilli(), nullable(m.Key), nullable(m.Value))
	for _, h := range m.Headers {
		s += fmt.Sprintf(" %s=%s", h.Key, nullable(h.Value))
	}
	return s
}

func nullable(b []byte) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprintf("%q", b)
}

// TestReadTopicReadsEveryRecordInPlace: a topic read returns each record
// with its partition, offset, time, key, value and headers as written
// (null and empty told apart), from plain and compressed batches, in
// offset order; transaction markers are left out, and records of an
// aborted transaction are read, as read_uncommitted does (what the
// dead-letter topic's reads always did).
func TestReadTopicReadsEveryRecordInPlace(t *testing.T) {
	cluster, c := newTopicCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.UnixMilli(1700000000123)
	rec := func(p int32, key, value []byte, headers ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: p, Key: key, Value: value, Headers: headers, Timestamp: at}
	}
	plain := franzClient(t, cluster, kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := plain.ProduceSync(ctx,
		rec(0, []byte("k"), []byte("v"), kgo.RecordHeader{Key: "id", Value: []byte("e-1")}, kgo.RecordHeader{Key: "empty", Value: []byte{}}),
		rec(0, nil, nil),
		rec(0, []byte{}, []byte{}, kgo.RecordHeader{Key: "null"}),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	zipped := franzClient(t, cluster, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	if err := zipped.ProduceSync(ctx, rec(1, []byte("z"), []byte("zipped"), kgo.RecordHeader{Key: "h", Value: []byte("1")})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := franzClient(t, cluster, kgo.TransactionalID("x"))
	for _, end := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, rec(1, []byte("t"), fmt.Appendf(nil, "commit=%v", end))).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := readAll(ctx, t, c, 1<<20)
	var shown []string
	for _, m := range got {
		shown = append(shown, show(m))
	}
	want := []string{
		`0/0 1700000000123 key="k" value="v" id="e-1" empty=""`,
		`0/1 1700000000123 key=null value=null`,
		`0/2 1700000000123 key="" value="" null=null`,
		`1/0 1700000000123 key="z" value="zipped" h="1"`,
		`1/1 1700000000123 key="t" value="commit=false"`, // aborted; its marker at 2
		`1/3 1700000000123 key="t" value="commit=true"`,
	}
	if !slices.Equal(shown, want) {
		t.Errorf("read\n%q, want\n%q", shown, want)
	}
}

// TestReadTopicKeepsAtMostItsBytes: a read keeps at most the bytes asked
// for (but always one record), and the next read starts at the first
// record it left, even in the middle of a batch: the records are read
// once each, in order, whatever the size.
func TestReadTopicKeepsAtMostItsBytes(t *testing.T) {
	cluster, c := newTopicCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "t", Key: fmt.Appendf(nil, "%02d", i), Value: make([]byte, 1000)})
	}
	// One batch of 20 records (lingering), compressed: the broker sends it
	// whole to every fetch that starts inside it.
	cl := franzClient(t, cluster, kgo.ProducerLinger(50*time.Millisecond), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		maxBytes  int32
		wantReads int // reads with records, and the one past the end at most
	}{{1, 20}, {2500, 10}, {1 << 20, 1}} {
		got, reads := readAll(ctx, t, c, tt.maxBytes)
		var keys []string
		for _, m := range got {
			keys = append(keys, string(m.Key))
		}
		if len(got) != 20 || !slices.IsSorted(keys) || reads > tt.wantReads {
			t.Errorf("%d bytes a read: %d records in %d reads (%v), want 20 in order in at most %d", tt.maxBytes, len(got), reads, keys, tt.wantReads)
		}
	}
}

// TestTopicMetadataSaysWhatTheBrokerKnows: a topic the broker does not
// know is a *TopicError of ErrUnknownTopic (its text the broker's), not a
// failure to ask; a known one has its partitions and their offsets.
func TestTopicMetadataSaysWhatTheBrokerKnows(t *testing.T) {
	cluster, c := newTopicCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Partitions(ctx, "missing")
	var te *TopicError
	if !errors.As(err, &te) || !errors.Is(err, ErrUnknownTopic) || te.Topic != "missing" {
		t.Errorf("partitions of a missing topic: %v, want a *TopicError of ErrUnknownTopic", err)
	}
	if err := franzClient(t, cluster).ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 2, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	parts, err := c.Partitions(ctx, "t")
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions of t: %v, %v; want 3", parts, err)
	}
	offsets, err := c.Offsets(ctx, "t", parts)
	if want := map[int32]Offsets{0: {0, 0}, 1: {0, 0}, 2: {0, 1}}; err != nil || fmt.Sprint(offsets) != fmt.Sprint(want) {
		t.Errorf("offsets of t: %v, %v; want %v", offsets, err, want)
	}
}
