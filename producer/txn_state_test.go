package producer

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refusedOnly fails t unless every call but Abort is refused.
func refusedOnly(ctx context.Context, t *testing.T, w *txnWriter, when string) {
	t.Helper()
	for name, call := range map[string]func() error{"Begin": w.Begin, "Init": func() error { return w.Init(ctx) },
		"Commit": func() error { return w.Commit(ctx) },
		"AddPartitions": func() error {
			return w.AddPartitions(ctx, map[string][]int32{txnTopic: {1}})
		}} {
		if err := call(); err == nil {
			t.Errorf("%s %s succeeded, want only Abort allowed", name, when)
		}
	}
}

// TestTxnFailedBump: Abort after the coordinator lost the producer id ends
// the transaction, then bumps the epoch. A bump that ends without a
// verdict leaves the Txn refusing everything but Abort (the next
// transaction would otherwise run on a producer id and epoch the
// coordinator no longer knows), and Abort again bumps; a refused bump is
// fatal.
func TestTxnFailedBump(t *testing.T) {
	cases := []struct {
		name string
		lost int16 // AddPartitions' answer: the coordinator lost the producer id
		bump int16 // InitProducerID's answer: CONCURRENT_TRANSACTIONS until the context ends, or a refusal
		want error // the kind of a refused bump; nil: no verdict
	}{
		{"unknown producer id, bump without a verdict", kerr.UnknownProducerID.Code, concurrent, nil},
		{"id mapping lost, bump without a verdict", kerr.InvalidProducerIDMapping.Code, concurrent, nil},
		{"unknown producer id, bump fenced", kerr.UnknownProducerID.Code, kerr.ProducerFenced.Code, ErrFenced},
		{"unknown producer id, bump refused", kerr.UnknownProducerID.Code, kerr.UnknownServerError.Code, ErrTxnFatal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			w, epoch := begun(ctx, t, c, "failed-bump", "aborted")
			inject(c, kmsg.AddPartitionsToTxn, tc.lost)
			if err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {1}}); !errors.Is(err, ErrTxnAbortable) {
				t.Fatalf("AddPartitions: %v, want abortable", err)
			}
			bumps := inject(c, kmsg.InitProducerID, slices.Repeat([]int16{tc.bump}, 1000)...)
			short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
			err := w.Abort(short)
			stop()
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Abort: %v, want %v", err, tc.want)
				}
				if err := w.Begin(); !errors.Is(err, tc.want) {
					t.Errorf("Begin after a refused bump: %v, want %v", err, tc.want)
				}
				return
			}
			var te *TxnError
			if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) {
				t.Fatalf("Abort: %v, want the deadline", err)
			}
			refusedOnly(ctx, t, w, "after a bump without a verdict")
			bumps.Store(1000)
			if err := w.Abort(ctx); err != nil {
				t.Fatalf("Abort again: %v", err)
			}
			if _, now := w.Producer(); now == epoch {
				t.Errorf("epoch %d after the second Abort, want a bump", now)
			}
			w.transaction(ctx, t, true, map[int32][]string{0: {"next"}, 1: {"next"}})
			if got := readCommitted(ctx, t, c, "next", 0, 1); !slices.Equal(got[0], []string{"next"}) {
				t.Errorf("read %q, want only the next transaction", got)
			}
		})
	}
}

// TestTxnInitWithoutVerdict: an Init between transactions (an epoch bump)
// that ends without a verdict leaves only Init allowed, which then bumps.
func TestTxnInitWithoutVerdict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newCluster(t, 1)
	w := ready(ctx, t, c, "init-verdict")
	_, epoch := w.Producer()
	busy := inject(c, kmsg.InitProducerID, slices.Repeat([]int16{concurrent}, 1000)...)
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	err := w.Init(short)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Init: %v, want the deadline", err)
	}
	if err := w.Begin(); err == nil {
		t.Error("Begin after an Init without a verdict succeeded")
	}
	busy.Store(1000)
	if err := w.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, now := w.Producer(); now <= epoch {
		t.Errorf("epoch %d after Init, was %d", now, epoch)
	}
	w.transaction(ctx, t, true, map[int32][]string{0: {"next"}})
}

// TestTxnAddWithoutVerdict: an AddPartitions that ends without a verdict
// (the context ends first) may have added the partition: Abort, or Commit
// of the transaction no partition is known in, ends it on the coordinator
// with EndTxn. A coordinator that had added nothing (a real broker
// answers INVALID_TXN_STATE: there is no transaction to end; kfake
// answers success) leaves the Txn ready.
func TestTxnAddWithoutVerdict(t *testing.T) {
	cases := []struct {
		name   string
		added  bool  // the coordinator adds the partition after the context ended
		commit bool  // Commit instead of Abort
		answer int16 // EndTxn's answer
	}{
		{"added, abort", true, false, 0},
		{"added, commit", true, true, 0},
		{"not added, abort", false, false, kerr.InvalidTxnState.Code},
		{"not added, commit", false, true, kerr.InvalidTxnState.Code},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			w := ready(ctx, t, c, "add-verdict")
			w.transaction(ctx, t, true, map[int32][]string{0: {"first"}})
			if err := w.Begin(); err != nil {
				t.Fatal(err)
			}
			release, busy := make(chan struct{}), &atomic.Int32{}
			if tc.added {
				var held atomic.Bool
				c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
					if held.CompareAndSwap(false, true) {
						c.SleepControl(func() { <-release })
					}
					return nil, nil, false
				})
			} else {
				busy = inject(c, kmsg.AddPartitionsToTxn, slices.Repeat([]int16{concurrent}, 1000)...)
			}
			short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
			err := w.AddPartitions(short, map[string][]int32{txnTopic: {1}})
			stop()
			close(release)
			busy.Store(1000)
			var te *TxnError
			if err == nil || errors.As(err, &te) || w.Added(txnTopic, 1) {
				t.Fatalf("AddPartitions: %v, want no verdict", err)
			}
			if tc.added {
				waitState(ctx, t, c, "add-verdict", "Ongoing")
			}
			ends := count(c, kmsg.EndTxn)
			if tc.answer != 0 {
				ends = inject(c, kmsg.EndTxn, tc.answer)
			}
			end := w.Abort
			if tc.commit {
				end = w.Commit
			}
			if err := end(ctx); err != nil {
				t.Fatalf("end (commit %v): %v", tc.commit, err)
			}
			if ends.Load() != 1 {
				t.Errorf("%d EndTxn requests, want 1", ends.Load())
			}
			if state := coordinatorState(ctx, t, c, "add-verdict"); state == "Ongoing" {
				t.Errorf("the coordinator's transaction is %s after the end", state)
			}
			w.transaction(ctx, t, true, map[int32][]string{0: {"next"}, 1: {"next"}})
			if got := readCommitted(ctx, t, c, "next", 0, 1); !slices.Equal(got[0], []string{"first", "next"}) {
				t.Errorf("read %q", got)
			}
		})
	}
}

// coordinatorState is the state of the transactional id's transaction, as the
// coordinator describes it.
func coordinatorState(ctx context.Context, t *testing.T, c *kfake.Cluster, id string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	res, err := req.RequestWith(ctx, cl)
	if err != nil || len(res.TransactionStates) != 1 || res.TransactionStates[0].ErrorCode != 0 {
		t.Fatalf("describe the transaction: %v %+v", err, res)
	}
	return res.TransactionStates[0].State
}

// waitState waits until the transactional id's transaction is in state.
func waitState(ctx context.Context, t *testing.T, c *kfake.Cluster, id, state string) {
	t.Helper()
	for coordinatorState(ctx, t, c, id) != state {
		select {
		case <-ctx.Done():
			t.Fatalf("the coordinator's transaction never %s", state)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTxnFatalStays: a fatal verdict (Refused with PRODUCER_FENCED, from a
// produce response another goroutine reads) that arrives while a request
// is out survives that request's success: the Txn stays fatal.
func TestTxnFatalStays(t *testing.T) {
	cases := []struct {
		name string
		key  kmsg.Key
		run  func(context.Context, *txnWriter) error
	}{
		{"commit", kmsg.EndTxn, func(ctx context.Context, w *txnWriter) error { return w.Commit(ctx) }},
		{"abort", kmsg.EndTxn, func(ctx context.Context, w *txnWriter) error { return w.Abort(ctx) }},
		{"abort's epoch bump", kmsg.InitProducerID, func(ctx context.Context, w *txnWriter) error {
			if err := w.Refused(kafka.UnknownProducerId); !errors.Is(err, ErrTxnAbortable) {
				return err
			}
			return w.Abort(ctx)
		}},
		{"add partitions", kmsg.AddPartitionsToTxn, func(ctx context.Context, w *txnWriter) error {
			return w.AddPartitions(ctx, map[string][]int32{txnTopic: {1}})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			w, _ := begun(ctx, t, c, "fatal-stays", "fenced")
			c.ControlKey(int16(tc.key), func(kmsg.Request) (kmsg.Response, error, bool) {
				w.Refused(kafka.ProducerFenced)
				return nil, nil, false
			})
			if err := tc.run(ctx, w); !errors.Is(err, ErrFenced) {
				t.Errorf("%s: %v, want ErrFenced", tc.name, err)
			}
			if err := w.Begin(); !errors.Is(err, ErrFenced) {
				t.Errorf("Begin: %v, want ErrFenced", err)
			}
		})
	}
}

// TestConcurrentPauseStartsShort: a transaction's first AddPartitions
// refused with CONCURRENT_TRANSACTIONS (the last commit's markers still
// being written) is retried after 2 ms, then 4, 8, 16 and 20 ms from then
// on. A fixed 20 ms (the Java producer's) delayed the whole transaction
// behind it and made exactly-once's p99 at 1,000 tx/s (docs/benchmarks.md).
func TestConcurrentPauseStartsShort(t *testing.T) {
	want := []time.Duration{2, 4, 8, 16, 20, 20, 20}
	for n, w := range want {
		if got := concurrentPause(n); got != w*time.Millisecond {
			t.Errorf("pause before retry %d: %v, want %v", n, got, w*time.Millisecond)
		}
	}
	if got := concurrentPause(1 << 20); got != concurrentBackoff {
		t.Errorf("pause after many retries: %v, want %v", got, concurrentBackoff)
	}
}
