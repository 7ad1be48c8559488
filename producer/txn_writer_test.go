package producer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionFenced: a second Txn with the writer's transactional id
// takes it mid-transaction (its Init aborts the writer's open transaction)
// and writes to partitions 0 and 1. The writer's next batch is refused,
// for its epoch by the partition leader or by the coordinator when the
// partition must first join the transaction; its events fail with an
// error wrapping ErrFenced, without a retry, a salvage or a dead
// letter, and so do the partition's later events, which are not even
// sent. A read_committed consumer reads the writer's committed
// transaction and the new holder's, none of the fenced one.
func TestTransactionFenced(t *testing.T) {
	for _, tc := range []struct {
		name      string
		partition int // where the writer publishes after the fence
		batches   int // its produce batches the broker then receives
		adds      int // its AddPartitionsToTxn requests then
	}{
		{"batch refused for its epoch", 0, 1, 0},
		{"partition refused by the coordinator", 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "fence", "dlq"))
			traffic := watchTxnTraffic(cluster)
			ctx := testContext(t, 45*time.Second)
			txn, o, token := begunTxn(ctx, t, cluster, "fence"), newOutcomes(), uint64(0)
			w := writerInTxn(cluster, "fence", testConfig{Transaction: txn, BatchTimeout: time.Millisecond, DeadLetterTopic: "dlq"}, o)
			for p := range 2 {
				checkFates(t, o, nil, publishTo(ctx, t, w, o, &token, p, "committed", "committed")...)
			}
			if err := txn.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := txn.Begin(); err != nil {
				t.Fatal(err)
			}
			checkFates(t, o, nil, publishTo(ctx, t, w, o, &token, 0, "fenced before", "fenced before")...)
			_, epoch := txn.Producer()
			before, addsBefore := traffic.of(epoch)

			next, bo, btoken := begunTxn(ctx, t, cluster, "fence"), newOutcomes(), uint64(0)
			bw := writerInTxn(cluster, "fence", testConfig{Transaction: next, BatchTimeout: time.Millisecond}, bo)
			for p := range 2 {
				checkFates(t, bo, nil, publishTo(ctx, t, bw, bo, &btoken, p, "new holder")...)
			}

			checkFates(t, o, ErrFenced, publishTo(ctx, t, w, o, &token, tc.partition, "fenced 1", "fenced 2", "fenced 3")...)
			after, addsAfter := traffic.of(epoch)
			checkFates(t, o, ErrFenced, publishTo(ctx, t, w, o, &token, tc.partition, "later", "later")...)
			checkFates(t, o, ErrFenced, publishTo(ctx, t, w, o, &token, 1-tc.partition/2, "elsewhere")...)
			later, addsLater := traffic.of(epoch)
			tp := partitionKey{"fence", tc.partition}
			if sent := after[tp] - before[tp]; sent != tc.batches || addsAfter-addsBefore != tc.adds {
				t.Errorf("after the fence: %d batches to partition %d, %d AddPartitionsToTxn; want %d and %d (no retry)",
					sent, tc.partition, addsAfter-addsBefore, tc.batches, tc.adds)
			}
			if !maps.Equal(after, later) || addsLater != addsAfter {
				t.Errorf("requests after the refusal: batches %v then %v, AddPartitionsToTxn %d then %d", after, later, addsAfter, addsLater)
			}
			if n := traffic.topic("dlq"); n != 0 || w.DeadLettered() != 0 {
				t.Errorf("%d batches to the dead-letter topic, %d dead-lettered: a fenced event was salvaged", n, w.DeadLettered())
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := txn.Commit(ctx); !errors.Is(err, ErrFenced) {
				t.Errorf("the fenced transaction's commit: %v, want ErrFenced", err)
			}
			if err := bw.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := next.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := consume(ctx, t, cluster, "fence", true, func(got map[int32][]*kgo.Record) bool {
				return len(got[0]) >= 3 && len(got[1]) >= 3
			})
			want := []string{"committed", "committed", "new holder"}
			if !slices.Equal(values(got[0]), want) || !slices.Equal(values(got[1]), want) || len(got[2]) > 0 {
				t.Errorf("read_committed read %q, %q, %q; want %q in partitions 0 and 1, nothing in 2", values(got[0]), values(got[1]), values(got[2]), want)
			}
		})
	}
}

// TestTransactionAddPartitionsRefused: the coordinator refuses to add a
// partition to the transaction. A refusal for good fails the batch with a
// transaction error (the Txn's verdict), sends nothing to the partition,
// asks no more, and the partition's later events fail too; CONCURRENT_
// TRANSACTIONS (the previous commit still writing its markers) is retried
// until the partition joins, and the events are committed.
func TestTransactionAddPartitionsRefused(t *testing.T) {
	for _, tc := range []struct {
		err   *kerr.Error
		count int   // AddPartitionsToTxn answers refused
		want  error // nil: the events are published and committed
	}{
		{kerr.TransactionalIDAuthorizationFailed, 1, ErrTxnUnauthorized},
		{kerr.TopicAuthorizationFailed, 1, ErrTxnAbortable},
		{kerr.ConcurrentTransactions, 3, nil},
	} {
		t.Run(tc.err.Message, func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "add"))
			traffic := watchTxnTraffic(cluster)
			ctx := testContext(t, 30*time.Second)
			txn, o, token := begunTxn(ctx, t, cluster, "add"), newOutcomes(), uint64(0)
			_, epoch := txn.Producer()
			refusals := cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AddPartitionsToTxn}, Err: tc.err, Count: tc.count})
			w := writerInTxn(cluster, "add", testConfig{Transaction: txn, BatchTimeout: time.Millisecond}, o)
			checkFates(t, o, tc.want, publishTo(ctx, t, w, o, &token, 0, "a", "b", "c")...)
			checkFates(t, o, tc.want, publishTo(ctx, t, w, o, &token, 1, "d")...)
			checkFates(t, o, tc.want, publishTo(ctx, t, w, o, &token, 0, "e")...)
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			batches, adds := traffic.of(epoch)
			if refusals.Hits() != tc.count {
				t.Fatalf("%d refusals injected, want %d", refusals.Hits(), tc.count)
			}
			err := txn.Commit(ctx)
			if tc.want != nil {
				if len(batches) != 0 || adds != 1 || !errors.Is(err, tc.want) {
					t.Errorf("batches %v, %d AddPartitionsToTxn (want none, and 1: no retry); commit: %v, want %q", batches, adds, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := consume(ctx, t, cluster, "add", true, func(got map[int32][]*kgo.Record) bool { return len(got[0]) >= 4 && len(got[1]) >= 1 })
			if !slices.Equal(values(got[0]), []string{"a", "b", "c", "e"}) || !slices.Equal(values(got[1]), []string{"d"}) {
				t.Errorf("read_committed read %q and %q", values(got[0]), values(got[1]))
			}
		})
	}
}

// TestTransactionFlush: requests are paced BatchTimeout (10 s) apart while
// events keep coming, and Flush(true) sends what waits at once, and what
// comes while it is on; Flush(false) paces again, and Close sends the
// rest. The order of a fate and a timer is asserted, with margins for a
// slow machine: held back means still waiting after 300 ms, sent at once
// means acknowledged within 2 s, both far from 10 s.
func TestTransactionFlush(t *testing.T) {
	besideOthersWhenShort(t)
	for _, transactional := range []bool{true, false} {
		t.Run(fmt.Sprint("transactional=", transactional), func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "flush"))
			ctx := testContext(t, 30*time.Second)
			cfg := testConfig{BatchTimeout: 10 * time.Second}
			var txn *Txn
			if transactional {
				txn = begunTxn(ctx, t, cluster, "flush")
				cfg.Transaction = txn
			}
			o, token := newOutcomes(), uint64(0)
			w := writerInTxn(cluster, "flush", cfg, o)
			publishTo(ctx, t, w, o, &token, 0, "first") // after a quiet spell: at once
			publish := func(v string) uint64 {
				ev := &event{ID: fmt.Sprint(token), AggregateID: "k", Payload: []byte(v)}
				if err := w.Publish(ctx, ev, token); err != nil {
					t.Fatal(err)
				}
				token++
				return token - 1
			}
			held := publish("held")
			if fateWithin(t, o, held, 300*time.Millisecond) {
				t.Fatal("an event 0.3 s after the last request was sent at once: BatchTimeout does not pace, the test proves nothing")
			}
			w.Flush(true)
			if !fateWithin(t, o, held, 2*time.Second) {
				t.Error("Flush(true) did not send the waiting event within 2 s")
			}
			if during := publish("during"); !fateWithin(t, o, during, 2*time.Second) {
				t.Error("an event published during Flush(true) was not sent within 2 s")
			}
			w.Flush(false)
			if paced := publish("paced"); fateWithin(t, o, paced, 300*time.Millisecond) {
				t.Error("after Flush(false) an event was sent at once: pacing did not resume")
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			checkFates(t, o, nil, 0, 1, 2, 3)
			if !transactional {
				return
			}
			if err := txn.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := consume(ctx, t, cluster, "flush", true, func(got map[int32][]*kgo.Record) bool { return len(got[0]) >= 4 })
			if want := []string{"first", "held", "during", "paced"}; !slices.Equal(values(got[0]), want) {
				t.Errorf("read_committed read %q, want %q", values(got[0]), want)
			}
		})
	}
}
