package delivery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// brokerTimeout is the --transaction-timeout of these tests: kfake's
// coordinator aborts a transaction open longer, as Kafka's does (to the
// millisecond: a timer per transaction). It is short, for the tests wait
// out several of it, and long beside what a fence takes against kfake
// (InitProducerID and a checkpoint read, a few milliseconds), which must
// not be judged an abort by timeout.
const brokerTimeout = 300 * time.Millisecond

// openTimed opens a session's exactly-once against kfake with the
// transaction timeout brokerTimeout; finish is called at the test's end.
func openTimed(t *testing.T, ctx context.Context, r *exactlyOnceMode) *exactly {
	t.Helper()
	r.cfg.TransactionTimeout = brokerTimeout
	x := newOpenExactly(r)
	if _, err := r.openExactly(ctx, x, openSystem, nil, openStart); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = x.Finish(context.Background(), false, true) })
	return x
}

// handOne hands over one event of the Postgres transaction committed at
// commit, as the receive loop does, and adds a partition to the Kafka
// transaction, as the writer does before its first batch: where the
// coordinator's clock starts.
func handOne(t *testing.T, ctx context.Context, x *exactly, xid uint32, commit pglogrepl.LSN) {
	t.Helper()
	if err := x.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	x.Handing(&decode.Event{CommitLSN: commit, Xid: xid, Payload: []byte(`{}`)})
	if err := x.txn.AddPartitions(ctx, map[string][]int32{x.ckpt.Topic(): {x.ckpt.Partition()}}); err != nil {
		t.Fatalf("add a partition: %v", err)
	}
	x.Leave(commit + 0x10)
}

// TestBrokerTimeoutJudged: against kfake, a Kafka transaction left open
// past its timeout is aborted by the coordinator, and the commit's
// refusal is judged an abort by timeout; the same Postgres transaction
// aborted so twice stops the relay. A fence by another instance taking
// the transactional id, before the timeout, is not judged one.
func TestBrokerTimeoutJudged(t *testing.T) {
	t.Parallel() // waits on the coordinator's clock, with a cluster of its own
	t.Run("the coordinator's timeout", func(t *testing.T) {
		_, r := openCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var judged txnTimeouts
		for i := range 2 {
			x := openTimed(t, ctx, r)
			handOne(t, ctx, x, 7, 0x2f0)
			time.Sleep(3 * brokerTimeout)
			err := x.commit()
			if err == nil {
				t.Fatalf("session %d committed a transaction open past its timeout", i+1)
			}
			t.Logf("session %d: %v", i+1, err)
			x.Fail(err)
			te, stop := judged.judge(x.TimedOut(err))
			if te == nil {
				t.Fatalf("session %d: %v not judged an abort by the transaction timeout", i+1, err)
			}
			if (stop != nil) != (i == 1) {
				t.Fatalf("session %d: stop %v", i+1, stop)
			}
		}
	})
	t.Run("another instance's fence", func(t *testing.T) {
		_, r := openCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		x := openTimed(t, ctx, r)
		handOne(t, ctx, x, 7, 0x2f0)
		openTimed(t, ctx, r) // takes the transactional id
		err := x.commit()
		if err == nil {
			t.Fatal("a fenced producer committed")
		}
		x.Fail(err)
		var te *txnTimeoutError
		if err := x.TimedOut(err); errors.As(err, &te) {
			t.Fatalf("a fence %s after the first event judged an abort by timeout: %v", brokerTimeout, err)
		}
	})
}

// TestTransactionClockStartsAtFirstEvent: the time a Kafka transaction
// stays open counts from its first event, not from the session's start
// or the last commit: the coordinator learns of a transaction at its first
// AddPartitionsToTxn (Begin is the client's only), and the relay's clock
// starts at the first event handed over after a commit. Idle time before
// a Postgres transaction neither aborts it nor makes a fence look like an
// abort by timeout.
func TestTransactionClockStartsAtFirstEvent(t *testing.T) {
	t.Parallel() // waits on the coordinator's clock, with a cluster of its own
	_, r := openCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x := openTimed(t, ctx, r)
	time.Sleep(3 * brokerTimeout) // idle after the session's Begin
	handOne(t, ctx, x, 7, 0x2f0)
	if err := x.commit(); err != nil {
		t.Fatalf("the first transaction, after %s idle: %v", 3*brokerTimeout, err)
	}
	time.Sleep(3 * brokerTimeout) // idle after a commit's Begin
	handOne(t, ctx, x, 8, 0x3f0)
	if err := x.commit(); err != nil {
		t.Fatalf("the second transaction, after %s idle: %v", 3*brokerTimeout, err)
	}
	time.Sleep(3 * brokerTimeout)
	handOne(t, ctx, x, 9, 0x4f0)
	openTimed(t, ctx, r) // another instance takes the id
	err := x.commit()
	if err == nil {
		t.Fatal("a fenced producer committed")
	}
	x.Fail(err)
	var te *txnTimeoutError
	if err := x.TimedOut(err); errors.As(err, &te) {
		t.Fatalf("a fence right after the first event, %s after the last commit, judged an abort by timeout: %v", 3*brokerTimeout, err)
	}
}
