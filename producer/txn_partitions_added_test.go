package producer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// resizeObserver counts the partition count changes a writer saw.
type resizeObserver struct {
	nopObserver
	changed atomic.Int32
}

func (o *resizeObserver) PartitionsChanged(string) { o.changed.Add(1) }

// TestTransactionPartitionsAddedWaitForCommit grows a topic while a
// transactional writer has a key's events in the open transaction: the
// key's later events of that transaction stay in its old partition (the
// commit markers reach two partitions one after the other, so an event in
// the new one could be readable before the earlier ones in the old), and
// the new count routes the key only in the next transaction. A row that
// names its partition goes there meanwhile, and the key's events after it
// stay.
func TestTransactionPartitionsAddedWaitForCommit(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "grow"))
	ctx := testContext(t, time.Minute)
	txn, o, obs := begunTxn(ctx, t, cluster, "grow"), newOutcomes(), &resizeObserver{}
	w := writerInTxn(cluster, "grow", testConfig{Transaction: txn, BatchTimeout: time.Millisecond, MetadataMaxAge: 50 * time.Millisecond, Observer: obs}, o)
	key := movingKey(t)
	token := uint64(0)
	publish := func() {
		t.Helper()
		ev := &event{ID: fmt.Sprint(token), AggregateID: key, Payload: []byte(fmt.Sprint(token))}
		if err := w.Publish(ctx, ev, token); err != nil {
			t.Fatalf("publish %d: %v", token, err)
		}
		token++
		o.wait(ctx, t, int(token))
	}
	for range 5 {
		publish()
	}
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
	if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "grow", Count: 4}}}); err != nil || res.Errors["grow"] != nil {
		t.Fatalf("create partitions: %v %v", err, res)
	}
	for obs.changed.Load() == 0 || token < 15 { // the writer learns the new count within the open transaction
		if ctx.Err() != nil {
			t.Fatal("the writer did not see the new partition count")
		}
		publish()
		time.Sleep(20 * time.Millisecond)
	}
	// A row that names its partition goes there: no count moves it, and
	// the key's later events of the transaction stay where they were.
	named := publishTo(ctx, t, w, o, &token, 3, "named")[0]
	for range 3 {
		publish()
	}
	inFirst := token
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		publish()
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkFates(t, o, nil, tokensUpTo(token)...)

	partitions := committedPartitions(ctx, t, cluster, "grow", int(token))
	moved := kafka.Message{Key: []byte(key)}
	want := balancer.Balance(moved, 0, 1, 2, 3)
	if p := partitions["named"]; p != 3 {
		t.Errorf("the event naming partition 3 went to %d", p)
	}
	for tok := range token {
		p := partitions[fmt.Sprint(tok)]
		switch {
		case tok == named:
		case tok < inFirst && p != 0:
			t.Errorf("event %d, in the transaction open when the topic grew, went to partition %d, not the key's old 0", tok, p)
		case tok >= inFirst && p != want:
			t.Errorf("event %d, in the next transaction, went to partition %d, want the key's new %d", tok, p, want)
		}
	}
}

// movingKey returns a key that murmur2 sends to partition 0 of 1 and to
// another of 4.
func movingKey(t *testing.T) string {
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if balancer.Balance(kafka.Message{Key: []byte(k)}, 0, 1, 2, 3) != 0 {
			return k
		}
	}
	t.Fatal("no key moves")
	return ""
}

func tokensUpTo(n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

// committedPartitions reads topic at read_committed until it holds want
// records, and returns each record's partition by its value.
func committedPartitions(ctx context.Context, t *testing.T, cluster *kfake.Cluster, topic string, want int) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Join(cluster.ListenAddrs(), ",")), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]int{}
	for len(out) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records", len(out), want)
		}
		fetches.EachRecord(func(r *kgo.Record) { out[string(r.Value)] = int(r.Partition) })
	}
	return out
}

// refuseTooLarge makes the cluster refuse with MESSAGE_TOO_LARGE every
// produce to topic whose records hold "too large", and counts the refusals.
func refuseTooLarge(cluster *kfake.Cluster, topic string) *atomic.Int32 {
	var refused atomic.Int32
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		refuse := false
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				refuse = refuse || rt.Topic == topic && bytes.Contains(rp.Records, []byte("too large"))
			}
		}
		if !refuse {
			return nil, nil, false
		}
		refused.Add(1)
		res := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, 10 // MESSAGE_TOO_LARGE
				st.Partitions = append(st.Partitions, p)
			}
			res.Topics = append(res.Topics, st)
		}
		return res, nil, true
	})
	return &refused
}

// TestTransactionRefusedSentAgainToItsPartition: an event the broker
// refuses for what it is, sent again alone before it is dead-lettered,
// goes to its batch's partition, not where routing would send it now (the
// topic grew while the transaction routes by the old count; a null key's
// sticky partition moved on): elsewhere, it would leave its transaction,
// and the relay would stop.
func TestTransactionRefusedSentAgainToItsPartition(t *testing.T) {
	besideOthersWhenShort(t)
	t.Run("after the topic grew", func(t *testing.T) {
		cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "grow", "dlq"))
		refuseTooLarge(cluster, "grow")
		ctx := testContext(t, time.Minute)
		txn, o, obs := begunTxn(ctx, t, cluster, "grow"), newOutcomes(), &resizeObserver{}
		w := writerInTxn(cluster, "grow", testConfig{Transaction: txn, BatchTimeout: time.Millisecond, MetadataMaxAge: 50 * time.Millisecond,
			Observer: obs, DeadLetterTopic: "dlq"}, o)
		key, token := movingKey(t), uint64(0)
		publish := func(v string) {
			t.Helper()
			ev := &event{ID: fmt.Sprint(token), AggregateID: key, Payload: []byte(v)}
			if err := w.Publish(ctx, ev, token); err != nil {
				t.Fatalf("publish %d: %v", token, err)
			}
			token++
			o.wait(ctx, t, int(token))
		}
		publish("a")
		client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
		if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "grow", Count: 4}}}); err != nil || res.Errors["grow"] != nil {
			t.Fatalf("create partitions: %v %v", err, res)
		}
		for obs.changed.Load() == 0 {
			if ctx.Err() != nil {
				t.Fatal("the writer did not see the new partition count")
			}
			publish("b")
			time.Sleep(20 * time.Millisecond)
		}
		publish("too large")
		if f, _ := o.get(token - 1); f.err != nil || f.reason != ReasonMessageTooLarge {
			t.Errorf("the refused event: err %v, reason %q; want dead-lettered as %s", f.err, f.reason, ReasonMessageTooLarge)
		}
	})
	t.Run("a dead letter after the dead-letter topic grew", func(t *testing.T) {
		cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "ev", "dlq"))
		refuseTooLarge(cluster, "dlq")
		ctx := testContext(t, time.Minute)
		txn, o, obs := begunTxn(ctx, t, cluster, "dl"), newOutcomes(), &resizeObserver{}
		w := writerInTxn(cluster, "ev", testConfig{Transaction: txn, BatchTimeout: time.Millisecond, MetadataMaxAge: 50 * time.Millisecond,
			Observer: obs, DeadLetterTopic: "dlq"}, o)
		key, token := movingKey(t), uint64(0)
		deadLetter := func(v string) { // as sink hands over the dead letter of a row whose partition column is no number
			t.Helper()
			dl := Outgoing{Topic: "dlq", Key: []byte(key), Value: []byte(v), Reason: ReasonInvalidPartition, Token: token}
			if err := w.Produce(ctx, dl); err != nil {
				t.Fatalf("publish %d: %v", token, err)
			}
			token++
			o.wait(ctx, t, int(token))
		}
		deadLetter("a")
		client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}
		if res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "dlq", Count: 4}}}); err != nil || res.Errors["dlq"] != nil {
			t.Fatalf("create partitions: %v %v", err, res)
		}
		for obs.changed.Load() == 0 {
			if ctx.Err() != nil {
				t.Fatal("the writer did not see the new partition count")
			}
			deadLetter("b")
			time.Sleep(20 * time.Millisecond)
		}
		deadLetter("too large")
		if f, _ := o.get(token - 1); f.err != nil || f.reason != ReasonMessageTooLarge {
			t.Errorf("the refused dead letter: err %v, reason %q; want it dead-lettered without its value (%s)", f.err, f.reason, ReasonMessageTooLarge)
		}
	})
	t.Run("a null key", func(t *testing.T) {
		cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(4, "nk"), kfake.SeedTopics(1, "dlq"))
		refuseTooLarge(cluster, "nk")
		ctx := testContext(t, time.Minute)
		txn, o := begunTxn(ctx, t, cluster, "nk"), newOutcomes()
		w := writerInTxn(cluster, "nk", testConfig{Transaction: txn, BatchTimeout: time.Millisecond, BatchSize: 1, DeadLetterTopic: "dlq"}, o)
		for token := range uint64(8) {
			if err := w.Publish(ctx, &event{ID: fmt.Sprint(token), Payload: []byte("too large")}, token); err != nil {
				t.Fatal(err)
			}
			o.wait(ctx, t, int(token+1))
			if f, _ := o.get(token); f.err != nil || f.reason != ReasonMessageTooLarge {
				t.Errorf("refused event %d: err %v, reason %q; want dead-lettered as %s", token, f.err, f.reason, ReasonMessageTooLarge)
			}
		}
	})
}
