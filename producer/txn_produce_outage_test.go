package producer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/internal/outage/outagetest"
)

// TestTransactionOutageLogged: in a transaction, produce requests the
// partition's leader refuses for four seconds, then an AddPartitionsToTxn
// the coordinator refuses for two seconds, each retried until answered,
// are two outages: each one warning naming the request, and one line
// saying it recovered and after how long, told by the transaction's
// tracker, which the writer reports its produce requests to: one tracker
// for every request of the transaction, so that one outage is one warning.
func TestTransactionOutageLogged(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "outage"))
	ctx := testContext(t, 30*time.Second)
	logs := &outagetest.Log{}
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	txn, err := NewTxn(TxnConfig{Addr: kafka.TCP(cluster.ListenAddrs()...), Transport: tr, TransactionalID: "outage",
		Timeout: 30 * time.Second, RetryBackoff: 5 * time.Millisecond, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(); err != nil {
		t.Fatal(err)
	}
	o, token := newOutcomes(), uint64(0)
	own := &outagetest.Log{} // the writer's: its produce requests are told to the transaction's tracker
	w := writerInTxn(cluster, "outage", testConfig{Transaction: txn, Logger: own.Logger(),
		RetryBackoffMin: 5 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond}, o)
	publishTo(ctx, t, w, o, &token, 0, "before") // partition 0 in the transaction
	// Produce retries back off from 5 ms, doubling up to 50 ms, with
	// jitter: an outage is told once it lasted a second, and its end
	// within 50 ms of the last refusal.
	const produceLasts, addLasts = 1500 * time.Millisecond, 1500 * time.Millisecond
	produce := failWith(cluster, kmsg.Produce, kerr.NotEnoughReplicas, produceLasts)
	publishTo(ctx, t, w, o, &token, 0, "produce refused")
	add := failWith(cluster, kmsg.AddPartitionsToTxn, kerr.CoordinatorNotAvailable, addLasts)
	publishTo(ctx, t, w, o, &token, 1, "add refused")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkFates(t, o, nil, 0, 1, 2)
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if produce.Hits() < 2 || add.Hits() < 2 {
		t.Fatalf("%d produce requests and %d AddPartitionsToTxn refused, want several of each", produce.Hits(), add.Hits())
	}
	logs.Check(t, outagetest.Outage{Request: "produce", Lasted: produceLasts}, outagetest.Outage{Request: "AddPartitionsToTxn", Lasted: addLasts})
	own.Check(t)
}

// failFor answers every request of key with code, for d from the first one
// it refuses.
func failWith(c *kfake.Cluster, key kmsg.Key, code *kerr.Error, d time.Duration) *kfake.FaultHandle {
	var first atomic.Int64
	return c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: code, Count: -1, When: func(kmsg.Request) bool {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		return now-first.Load() < int64(d)
	}})
}
