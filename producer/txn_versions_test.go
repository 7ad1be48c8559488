package producer

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestTxnBumpBeforeKafka25: against a broker older than 2.5 (InitProducerID
// below v3, no KIP-360) an epoch bump would be a fresh InitProducerID,
// which takes the transactional id from whoever holds it. Instance A lost
// its producer id mapping, B took the id meanwhile; A's Abort must fail
// for good instead of fencing B, whose transaction commits.
func TestTxnBumpBeforeKafka25(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, txnTopic), kfake.MaxVersions(kversion.V2_4_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	a, _ := begun(ctx, t, c, "old-broker")
	b := newWriter(t, c, "old-broker")
	inject(c, kmsg.AddPartitionsToTxn, kerr.InvalidProducerIDMapping.Code)
	if err := a.AddPartitions(ctx, map[string][]int32{txnTopic: {0}}); !errors.Is(err, ErrTxnAbortable) {
		t.Fatalf("A's AddPartitions: %v, want abortable", err)
	}
	if err := b.Init(ctx); err != nil {
		t.Fatal(err)
	}
	inits := count(c, kmsg.InitProducerID)
	var te *TxnError
	if err := a.Abort(ctx); !errors.Is(err, ErrTxnFatal) || !errors.As(err, &te) || !te.Fatal() {
		t.Fatalf("A's Abort: %v, want ErrTxnFatal", err)
	}
	if inits.Load() != 0 {
		t.Errorf("A sent %d InitProducerID requests, want none", inits.Load())
	}
	if err := a.Begin(); !errors.Is(err, ErrTxnFatal) {
		t.Errorf("A's Begin: %v, want ErrTxnFatal", err)
	}
	b.transaction(ctx, t, true, map[int32][]string{0: {"b"}, 1: {"b"}})
	if got := readCommitted(ctx, t, c, "b", 0, 1); !slices.Equal(got[0], []string{"b"}) {
		t.Errorf("read %q, want B's records", got)
	}
}
