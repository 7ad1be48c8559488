package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// inject answers the next len(codes) requests of key with those error
// codes, and counts them.
func inject(c *kfake.Cluster, key kmsg.Key, codes ...int16) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		i := int(n.Load())
		if i >= len(codes) {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		n.Add(1)
		return failed(req, codes[i]), nil, true
	})
	return &n
}

// failed is req's response carrying code.
func failed(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.ResponseKind().(type) {
	case *kmsg.FindCoordinatorResponse:
		r.ErrorCode, r.NodeID = code, -1
		return r
	case *kmsg.InitProducerIDResponse:
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = code, -1, -1
		return r
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
		return r
	case *kmsg.AddPartitionsToTxnResponse:
		for _, rt := range req.(*kmsg.AddPartitionsToTxnRequest).Topics {
			topic := kmsg.NewAddPartitionsToTxnResponseTopic()
			topic.Topic = rt.Topic
			for _, p := range rt.Partitions {
				part := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				part.Partition, part.ErrorCode = p, code
				topic.Partitions = append(topic.Partitions, part)
			}
			r.Topics = append(r.Topics, topic)
		}
		return r
	}
	panic(fmt.Sprintf("no failure for %T", req))
}

var (
	notCoordinator = kerr.NotCoordinator.Code
	notAvailable   = kerr.CoordinatorNotAvailable.Code
	loading        = kerr.CoordinatorLoadInProgress.Code
	concurrent     = kerr.ConcurrentTransactions.Code
)

// TestTxnRetries: the coordinator's "not now" answers to each request are
// retried until the transaction commits, and the consumer reads it.
func TestTxnRetries(t *testing.T) {
	cases := []struct {
		key   kmsg.Key
		codes []int16
	}{
		{kmsg.FindCoordinator, []int16{notAvailable, notAvailable}},
		{kmsg.InitProducerID, []int16{notCoordinator, loading, concurrent, notAvailable}},
		{kmsg.AddPartitionsToTxn, []int16{concurrent, concurrent, concurrent, notCoordinator, kerr.UnknownTopicOrPartition.Code}},
		{kmsg.EndTxn, []int16{concurrent, concurrent, notAvailable, notCoordinator, loading}},
	}
	for _, tc := range cases {
		t.Run(tc.key.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			n := inject(c, tc.key, tc.codes...)
			w := ready(ctx, t, c, "retries")
			w.transaction(ctx, t, true, map[int32][]string{0: {"x", "end"}, 1: {"y", "end"}})
			if int(n.Load()) != len(tc.codes) {
				t.Errorf("%d of %d failures injected", n.Load(), len(tc.codes))
			}
			got := readCommitted(ctx, t, c, "end", 0, 1)
			if !slices.Equal(got[0], []string{"x", "end"}) || !slices.Equal(got[1], []string{"y", "end"}) {
				t.Errorf("read %q", got)
			}
		})
	}
}

// TestTxnCoordinatorMoves: the coordinator moves to another broker after
// kafka-go looked it up for an AddPartitionsToTxn and before the request
// arrives (kfake rehashes the transactional ids); the old coordinator
// answers NOT_COORDINATOR, the retry finds the new one, and the
// transaction commits through it.
func TestTxnCoordinatorMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := movingID(t)
	c := newCluster(t, 3)
	w := ready(ctx, t, c, id)
	w.transaction(ctx, t, true, map[int32][]string{0: {"before"}})
	old := c.CoordinatorFor(id)
	var adds atomic.Int32
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		if adds.Add(1) == 1 {
			c.RehashCoordinators()
		}
		c.KeepControl()
		return nil, nil, false
	})
	w.transaction(ctx, t, true, map[int32][]string{0: {"after"}, 1: {"after"}})
	if now := c.CoordinatorFor(id); now == old || adds.Load() != 2 {
		t.Errorf("coordinator %d, then %d; %d AddPartitionsToTxn requests, want 2 (one refused)", old, now, adds.Load())
	}
	got := readCommitted(ctx, t, c, "after", 0, 1)
	if !slices.Equal(got[0], []string{"before", "after"}) || !slices.Equal(got[1], []string{"after"}) {
		t.Errorf("read %q", got)
	}
}

// movingID returns a transactional id whose coordinator, in a new
// three-broker kfake cluster, moves at the first rehash (kfake hashes the
// id with a generation that each rehash increments).
func movingID(t *testing.T) string {
	scratch := newCluster(t, 3)
	before := map[string]int32{}
	for i := range 20 {
		id := fmt.Sprintf("moving-%d", i)
		before[id] = scratch.CoordinatorFor(id)
	}
	scratch.RehashCoordinators()
	for i := range 20 {
		if id := fmt.Sprintf("moving-%d", i); scratch.CoordinatorFor(id) != before[id] {
			return id
		}
	}
	t.Fatal("no transactional id moves at a rehash")
	return ""
}

// TestTxnRefusals: answers that end a transaction or the producer.
func TestTxnRefusals(t *testing.T) {
	cases := []struct {
		name   string
		key    kmsg.Key
		code   int16
		want   error // the kind Commit (or AddPartitions) returns
		bumped bool  // Abort bumps the epoch
	}{
		{"add: not authorized", kmsg.AddPartitionsToTxn, kerr.TransactionalIDAuthorizationFailed.Code, ErrTxnUnauthorized, false},
		{"add: invalid state", kmsg.AddPartitionsToTxn, kerr.InvalidTxnState.Code, ErrTxnFatal, false},
		{"add: fenced", kmsg.AddPartitionsToTxn, kerr.ProducerFenced.Code, ErrFenced, false},
		{"add: topic not authorized", kmsg.AddPartitionsToTxn, kerr.TopicAuthorizationFailed.Code, ErrTxnAbortable, false},
		{"add: unknown producer id", kmsg.AddPartitionsToTxn, kerr.UnknownProducerID.Code, ErrTxnAbortable, true},
		{"commit: old epoch", kmsg.EndTxn, kerr.InvalidProducerEpoch.Code, ErrFenced, false},
		{"commit: invalid state", kmsg.EndTxn, kerr.InvalidTxnState.Code, ErrTxnFatal, false},
		{"commit: id mapping lost", kmsg.EndTxn, kerr.InvalidProducerIDMapping.Code, ErrTxnAbortable, true},
		{"commit: unknown error", kmsg.EndTxn, kerr.UnknownServerError.Code, ErrTxnFatal, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			var values []string // an EndTxn case adds partition 0 and writes to it first
			if tc.key == kmsg.EndTxn {
				values = []string{"refused"}
			}
			w, epoch := begun(ctx, t, c, "refusals", values...)
			inject(c, tc.key, tc.code)
			err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {1}})
			if tc.key == kmsg.EndTxn {
				if err != nil {
					t.Fatal(err)
				}
				err = w.Commit(ctx)
			}
			var te *TxnError
			if !errors.Is(err, tc.want) || !errors.As(err, &te) || te.Fatal() != (tc.want != ErrTxnAbortable) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if te.Fatal() {
				if err := w.Begin(); !errors.Is(err, tc.want) {
					t.Errorf("Begin after a fatal error: %v", err)
				}
				return
			}
			if err := w.Commit(ctx); !errors.Is(err, ErrTxnAbortable) {
				t.Errorf("Commit of an abortable transaction: %v", err)
			}
			if err := w.Abort(ctx); err != nil {
				t.Fatalf("abort: %v", err)
			}
			if _, now := w.Producer(); (now != epoch) != tc.bumped {
				t.Errorf("epoch %d after the abort, was %d; want a bump %v", now, epoch, tc.bumped)
			}
			w.transaction(ctx, t, true, map[int32][]string{0: {"next"}, 1: {"next"}})
			got := readCommitted(ctx, t, c, "next", 0, 1)
			if !slices.Equal(got[0], []string{"next"}) {
				t.Errorf("read %q, want only the next transaction", got)
			}
		})
	}
}

// TestTxnCommitWithoutVerdict: a commit the coordinator keeps refusing
// with CONCURRENT_TRANSACTIONS until the context ends returns an error
// that is no TxnError; the transaction can be neither continued nor
// aborted, and Commit again commits it.
func TestTxnCommitWithoutVerdict(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	w, _ := begun(ctx, t, c, "verdict", "late")
	busy := inject(c, kmsg.EndTxn, slices.Repeat([]int16{concurrent}, 1000)...)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := w.Commit(short)
	cancel()
	var te *TxnError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) || busy.Load() < 2 {
		t.Fatalf("commit: %v after %d answers, want the deadline", err, busy.Load())
	}
	if err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {1}}); err == nil {
		t.Error("AddPartitions during a commit without a verdict succeeded")
	}
	if err := w.Abort(ctx); err == nil {
		t.Error("Abort of a commit without a verdict succeeded")
	}
	if err := w.Init(ctx); err == nil {
		t.Error("Init during a commit without a verdict succeeded")
	}
	busy.Store(1000)
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readCommitted(ctx, t, c, "late", 0); !slices.Equal(got[0], []string{"late"}) {
		t.Errorf("read %q", got)
	}
}

// TestTxnRefusedProduce: a produce the partition's leader refused for its
// producer state (or whose fate is unknown) makes Abort bump the epoch, so
// that the next transaction's sequences start again; a refusal of the
// batch itself aborts without one.
func TestTxnRefusedProduce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		bumped bool
	}{
		{"unknown producer id", kafka.UnknownProducerId, true},
		{"out of order sequence", kafka.OutOfOrderSequenceNumber, true},
		{"no answer", context.DeadlineExceeded, true},
		{"record too large", kafka.MessageSizeTooLarge, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := newCluster(t, 1)
			w, epoch := begun(ctx, t, c, "refused-produce")
			if err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {0}}); err != nil {
				t.Fatal(err)
			}
			if err := w.Refused(tc.err); !errors.Is(err, ErrTxnAbortable) {
				t.Fatalf("Refused: %v, want abortable", err)
			}
			if err := w.AddPartitions(ctx, map[string][]int32{txnTopic: {1}}); !errors.Is(err, ErrTxnAbortable) {
				t.Errorf("AddPartitions after a refusal: %v, want abortable", err)
			}
			if err := w.Abort(ctx); err != nil {
				t.Fatalf("abort: %v", err)
			}
			if _, now := w.Producer(); (now != epoch) != tc.bumped {
				t.Errorf("epoch %d after the abort, was %d; want a bump %v", now, epoch, tc.bumped)
			}
		})
	}
}
