package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/internal/outage"
	"github.com/outbox-cdc/outbox-cdc/internal/outage/outagetest"
)

// testGrace is the outage tracker's grace in these tests (a second in
// production, outage.Grace): outages of a few times it prove the same
// lines in a fraction of the time. The Txn's retries, 5 ms doubling,
// come 75, 155 and 315 ms after the first refusal: one past the grace
// and within an outage of 3*testGrace, with 145 ms for the round trips.
const testGrace = 100 * time.Millisecond

// TestTxnOutageLogged: a transactional request the coordinator keeps
// refusing for three times the tracker's grace, while the Txn retries it, is
// one warning naming the request, however many attempts fail, and, once
// it is answered, one line saying how long the outage lasted; a second
// outage gets a pair of its own, and a refusal shorter than the grace
// says nothing.
func TestTxnOutageLogged(t *testing.T) {
	cases := []struct {
		key     kmsg.Key
		lasts   time.Duration
		request string // the request the warning names; "": no line
	}{
		{kmsg.FindCoordinator, 3 * testGrace, "FindCoordinator"},
		{kmsg.InitProducerID, 3 * testGrace, "InitProducerID"},
		{kmsg.AddPartitionsToTxn, 3 * testGrace, "AddPartitionsToTxn"},
		{kmsg.EndTxn, 3 * testGrace, "EndTxn(commit)"},
		{kmsg.EndTxn, 3 * testGrace / 10, ""},
	}
	for _, tc := range cases {
		t.Run(tc.key.Name()+"/"+tc.lasts.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			logs := &outagetest.Log{}
			w := newLoggedWriter(t, c, "outage", logs)
			initKey := tc.key == kmsg.FindCoordinator || tc.key == kmsg.InitProducerID
			if !initKey {
				if err := w.Init(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				down := failFor(c, tc.key, tc.lasts)
				if initKey {
					if err := w.Init(ctx); err != nil {
						t.Fatal(err)
					}
				} else {
					w.transaction(ctx, t, true, map[int32][]string{0: {"x"}})
				}
				if down.Hits() < 2 {
					t.Fatalf("%d requests refused, want several", down.Hits())
				}
			}
			var want []outagetest.Outage
			if tc.request != "" {
				want = []outagetest.Outage{{Request: tc.request, Lasted: tc.lasts}, {Request: tc.request, Lasted: tc.lasts}}
			}
			logs.Check(t, want...)
		})
	}
}

// newLoggedWriter is newWriter logging to logs, its outages warned of
// after testGrace.
func newLoggedWriter(t *testing.T, c *kfake.Cluster, id string, logs *outagetest.Log) *txnWriter {
	t.Helper()
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	txn, err := NewTxn(TxnConfig{Addr: kafka.TCP(c.ListenAddrs()...), Transport: tr, TransactionalID: id, Timeout: 30 * time.Second,
		RetryBackoff: 5 * time.Millisecond, Logger: logs.Logger(), Outage: outage.NewAfter(logs.Logger(), testGrace)})
	if err != nil {
		t.Fatal(err)
	}
	return &txnWriter{Txn: txn, transport: tr, seq: map[int32]int32{}, epoch: -1}
}

// failFor answers every request of key with COORDINATOR_NOT_AVAILABLE, a
// retriable refusal, for d from the first one it refuses. (kafka-go asks
// FindCoordinator in a version whose error is top-level, AddPartitionsToTxn
// in one whose errors are its partitions'.)
func failFor(c *kfake.Cluster, key kmsg.Key, d time.Duration) *kfake.FaultHandle {
	var first atomic.Int64
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: kerr.CoordinatorNotAvailable, Count: -1, TopLevel: key == kmsg.FindCoordinator,
		When: func(kmsg.Request) bool {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			return now-first.Load() < int64(d)
		}})
	return h
}
