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

	"github.com/outbox-cdc/outbox-cdc/internal/outage/outagetest"
)

// TestTxnOutageLogged: a transactional request the coordinator keeps
// refusing for two seconds, while the Txn retries it, is one warning
// naming the request, however many attempts fail, and, once it is
// answered, one line saying how long the outage lasted; a second outage
// gets a pair of its own, and a refusal shorter than a second says
// nothing.
func TestTxnOutageLogged(t *testing.T) {
	cases := []struct {
		key     kmsg.Key
		lasts   time.Duration
		request string // the request the warning names; "": no line
	}{
		{kmsg.FindCoordinator, 2 * time.Second, "FindCoordinator"},
		{kmsg.InitProducerID, 2 * time.Second, "InitProducerID"},
		{kmsg.AddPartitionsToTxn, 2 * time.Second, "AddPartitionsToTxn"},
		{kmsg.EndTxn, 2 * time.Second, "EndTxn(commit)"},
		{kmsg.EndTxn, 300 * time.Millisecond, ""},
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

// newLoggedWriter is newWriter logging to logs.
func newLoggedWriter(t *testing.T, c *kfake.Cluster, id string, logs *outagetest.Log) *txnWriter {
	t.Helper()
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	txn, err := NewTxn(TxnConfig{Addr: kafka.TCP(c.ListenAddrs()...), Transport: tr, TransactionalID: id, Timeout: 30 * time.Second,
		RetryBackoff: 5 * time.Millisecond, Logger: logs.Logger()})
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
