package producer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionDeadLetterOfARefusal: the broker refuses one batch for
// what it holds (MESSAGE_TOO_LARGE, as a topic whose max.message.bytes is
// below the relay's). In a transaction, the salvage that sends its events
// one by one cannot send the refused event's dead letter itself (it may
// send only to the partition it holds): the dead letter goes through the
// dead-letter topic's queue, in the transaction, and its acknowledgement
// settles the event, dead-lettered. The other events are published; after
// the commit a read_committed consumer reads the dead letter once.
func TestTransactionDeadLetterOfARefusal(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big", "dlq"))
	refused := refuseTooLarge(cluster, "big")
	ctx := testContext(t, 45*time.Second)
	txn, o, token := begunTxn(ctx, t, cluster, "dl"), newOutcomes(), uint64(0)
	w := writerInTxn(cluster, "big", testConfig{Transaction: txn, BatchTimeout: time.Millisecond, DeadLetterTopic: "dlq"}, o)
	tokens := publishTo(ctx, t, w, o, &token, 0, "before", "too large", "after")
	for i, tok := range tokens {
		f, _ := o.get(tok)
		wantReason := ""
		if i == 1 {
			wantReason = ReasonMessageTooLarge
		}
		if f.times != 1 || f.err != nil || f.reason != wantReason {
			t.Errorf("event %d: %d fates, err %v, reason %q; want one, nil, %q", tok, f.times, f.err, f.reason, wantReason)
		}
	}
	if refused.Load() == 0 {
		t.Fatal("the broker refused nothing: the test did not test")
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	dead := consume(ctx, t, cluster, "dlq", true, func(got map[int32][]*kgo.Record) bool { return len(got[0]) >= 1 })
	if n := len(dead[0]); n != 1 || string(dead[0][0].Value) != "too large" {
		t.Errorf("read_committed dead letters: %d, want the refused event's once", n)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
