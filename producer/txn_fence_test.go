package producer

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTransactionFenceIsNoOutage: a batch refused because another Txn
// took the transactional id is a verdict, not an outage: the brokers
// answered. The transaction's outage tracker, which the relay shares
// across sessions, must not be left failing by it: a fenced Txn sends
// nothing more, so no success would ever clear it, and the next session's
// first transient failure (CONCURRENT_TRANSACTIONS at InitProducerID,
// routine after a takeover) would be warned of at once as an outage
// lasting since the fence, and fail /readyz.
func TestTransactionFenceIsNoOutage(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "fence"))
	ctx := testContext(t, 30*time.Second)
	txn, o, token := begunTxn(ctx, t, cluster, "fence"), newOutcomes(), uint64(0)
	w := writerInTxn(cluster, "fence", testConfig{Transaction: txn, BatchTimeout: time.Millisecond}, o)
	checkFates(t, o, nil, publishTo(ctx, t, w, o, &token, 0, "committed")...)
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(); err != nil {
		t.Fatal(err)
	}
	checkFates(t, o, nil, publishTo(ctx, t, w, o, &token, 0, "before")...)
	// Another Txn takes the id and writes to the partition: the writer's
	// next batch there is refused for its epoch.
	next, bo, btoken := begunTxn(ctx, t, cluster, "fence"), newOutcomes(), uint64(0)
	bw := writerInTxn(cluster, "fence", testConfig{Transaction: next, BatchTimeout: time.Millisecond}, bo)
	checkFates(t, bo, nil, publishTo(ctx, t, bw, bo, &btoken, 0, "new holder")...)
	if err := bw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkFates(t, o, ErrFenced, publishTo(ctx, t, w, o, &token, 0, "fenced")...)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Abort(ctx); !errors.Is(err, ErrFenced) { // what a session's end does; no request
		t.Fatalf("abort after the fence: %v, want ErrFenced", err)
	}
	if since, request, last, failing := txn.Outage().Failing(0); failing {
		t.Errorf("after a fence the tracker says %s failing since %s (%s); want no outage", request, since.Format(time.RFC3339Nano), last)
	}
}
