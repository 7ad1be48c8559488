package cleanup

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestHoldRelease: rows held for a Kafka commit are not cleaned (nor their
// events acked) until Release, which returns once Release's or Run's
// flushes settled every one of them; Done's events are acked as before.
// The rows are untracked (kept), so no statement runs and no server is
// needed: what is tested is the bookkeeping.
func TestHoldRelease(t *testing.T) {
	var mu sync.Mutex
	var acked []uint64
	c := &Cleaner{tables: map[string]table{}, rows: map[uint64]row{}, wake: make(chan struct{}, 1),
		ack: func(seq uint64) { mu.Lock(); acked = append(acked, seq); mu.Unlock() }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for seq := range uint64(3) {
		c.Hold(seq, "")
	}
	c.Done(10, "")
	if c.releasing != 0 || len(c.held) != 3 || len(c.ready) != 1 {
		t.Fatalf("before Release: releasing %d, held %d, ready %d; want 0, 3, 1", c.releasing, len(c.held), len(c.ready))
	}
	committed := c.Commit()
	c.Hold(5, "") // the next Kafka transaction's: not released with this one
	if err := c.Release(ctx, committed); err != nil {
		t.Fatal(err)
	}
	if len(c.held) != 1 {
		t.Errorf("held %d after Release, want 1 (the next transaction's)", len(c.held))
	}
	c.held = nil
	if c.releasing != 0 || len(c.held) != 0 || len(c.ready) != 0 {
		t.Errorf("after Release: releasing %d, held %d, ready %d; want 0, 0, 0", c.releasing, len(c.held), len(c.ready))
	}
	if !slices.Equal(acked, []uint64{10}) {
		t.Errorf("acked %v, want [10]: held events are acked by the caller, not the cleaner", acked)
	}

	// Run's flushes count too: Release waits for them, and returns.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go c.Run(runCtx)
	for seq := range uint64(2000) {
		c.Hold(100+seq, "")
	}
	c.wake <- struct{}{}
	if err := c.Release(ctx, c.Commit()); err != nil {
		t.Fatalf("Release beside Run: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.releasing != 0 {
		t.Errorf("releasing %d after Release, want 0", c.releasing)
	}
}
