package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// ackedAfterCheckpoint is a tracker whose last acknowledgement arrives only
// once the checkpoint partition is in the Kafka transaction: a commit that
// waited for every acknowledgement before it began writing the checkpoint
// would wait for ever.
type ackedAfterCheckpoint struct {
	x *exactly
}

func (a ackedAfterCheckpoint) Confirmed() pglogrepl.LSN                { return openStart }
func (a ackedAfterCheckpoint) ConfirmIdle(pglogrepl.LSN) pglogrepl.LSN { return openStart }
func (a ackedAfterCheckpoint) WaitAcked(ctx context.Context) error {
	for !a.x.txn.Added(a.x.ckpt.Topic(), a.x.ckpt.Partition()) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("acknowledgements: %w", context.Cause(ctx))
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// TestCommitWritesCheckpointWhileAcksAreAwaited: a commit writes its
// checkpoint record into the Kafka transaction while the last produce
// acknowledgements are still on their way, rather than after them: both are
// needed before EndTxn, and the transaction makes them one, so waiting for
// one before the other only adds its round trips to every commit's latency.
func TestCommitWritesCheckpointWhileAcksAreAwaited(t *testing.T) {
	_, r := openCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.cfg.TransactionTimeout = 2 * time.Second // bounds the commit
	x := newOpenExactly(r)
	if _, err := r.openExactly(ctx, x, openSystem, nil, openStart); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = x.Finish(context.Background(), false, true) })
	x.track = ackedAfterCheckpoint{x: x}
	if err := x.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	x.uncommitted.Add(1)
	x.last = boundary{commit: 0x12f0, xid: 7}
	x.Leave(0x1300)
	if err := x.commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := pglogrepl.LSN(x.committed.Load()); got != 0x1300 {
		t.Fatalf("committed through %s, want 0/1300", got)
	}
}
