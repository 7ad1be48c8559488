package relay

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestExactlyConfirms walks the position exactly-once lets the slot be
// confirmed at, on the receive loop's calls: the start until a Kafka
// commit while any event waits for one, the tracker's (transactions without
// events, an idle server's WAL end) while none does.
func TestExactlyConfirms(t *testing.T) {
	track := checkpoint.New(0x100, 10, 1<<20)
	x := newExactly(track, defaultDelivery(), 0x100, slog.New(slog.DiscardHandler))
	ctx := context.Background()

	// A transaction without events moves the slot: nothing waits.
	track.Begin()
	track.Commit(0x200)
	if got := x.Confirmed(); got != 0x200 {
		t.Fatalf("after a transaction without events: %s, want 0/200", got)
	}
	// A transaction with an event: held back while it waits for a commit,
	// even once the broker acknowledged it.
	track.Begin()
	ev := &decode.Event{CommitLSN: 0x2f0, Xid: 7}
	if err := x.enter(ctx); err != nil {
		t.Fatal(err)
	}
	x.handing(ev)
	seq, err := track.Reserve(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Confirmed(); got != 0x200 {
		t.Errorf("inside the transaction: %s, want 0/200", got)
	}
	track.Ack(seq)
	track.Commit(0x300)
	x.leave(0x300)
	if got := x.Confirmed(); got != 0x200 {
		t.Errorf("acknowledged, not committed in Kafka: %s, want 0/200", got)
	}
	if got := x.ConfirmIdle(0x900); got != 0x200 {
		t.Errorf("an idle keepalive while an event waits for a commit: %s, want 0/200", got)
	}
	if x.closed.end != 0x300 || x.closed.commit != 0x2f0 || x.closed.xid != 7 {
		t.Errorf("the checkpoint's transaction: %+v, want commit 0/2F0 end 0/300 xid 7", x.closed)
	}
	// What a commit does once the Kafka transaction committed: the
	// keepalive came after everything before it was received, so its WAL
	// end is confirmed now that the event is committed.
	x.raise(x.closed.end)
	x.uncommitted.Add(-1)
	if got := x.Confirmed(); got != 0x900 {
		t.Errorf("committed: %s, want the keepalive's 0/900", got)
	}
	if got := x.ConfirmIdle(0xa00); got != 0xa00 {
		t.Errorf("an idle keepalive with nothing waiting: %s, want 0/A00", got)
	}
}

// TestExactlyStandaloneMessage: a non-transactional message ends where it
// begins; its checkpoint must end past it, so that a restart skips it.
func TestExactlyStandaloneMessage(t *testing.T) {
	x := newExactly(checkpoint.New(0x100, 10, 1<<20), defaultDelivery(), 0x100, slog.New(slog.DiscardHandler))
	if err := x.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	x.handing(&decode.Event{CommitLSN: 0x500})
	x.leave(0x500)
	if x.closed.end != 0x501 {
		t.Fatalf("end %s, want 0/501", x.closed.end)
	}
	x.skip = x.closed.end
	if !x.skips(0x500) || x.skips(0x501) {
		t.Errorf("skips 0/500 %v (want true), 0/501 %v (want false)", x.skips(0x500), x.skips(0x501))
	}
}

// TestExactlyGate: a commit waits for the receive loop to finish the
// Postgres transaction it is handing over, and the receive loop waits for
// a commit under way; finish without a commit cuts a commit short that
// waits for acknowledgements that will not come.
func TestExactlyGate(t *testing.T) {
	track := checkpoint.New(0x100, 10, 1<<20)
	x := newExactly(track, defaultDelivery(), 0x100, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if err := x.enter(ctx); err != nil {
		t.Fatal(err)
	}
	taken := make(chan struct{})
	go func() { x.gate <- struct{}{}; close(taken) }() // a commit asking for the gate
	select {
	case <-taken:
		t.Fatal("a commit took the gate inside a Postgres transaction")
	case <-time.After(50 * time.Millisecond):
	}
	x.leave(0x200)
	<-taken
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := x.enter(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("entering while a commit holds the gate: %v, want the context's end", err)
	}
	<-x.gate

	// A commit waiting for an acknowledgement that never comes.
	if err := x.enter(ctx); err != nil {
		t.Fatal(err)
	}
	x.handing(&decode.Event{CommitLSN: 0x300})
	if _, err := track.Reserve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	x.leave(0x310)
	done := make(chan error, 1)
	go func() {
		x.gate <- struct{}{}
		done <- x.commit()
		<-x.gate
	}()
	time.Sleep(20 * time.Millisecond)
	x.abort(errors.New("the writer gave up"))
	if err := <-done; err == nil {
		t.Fatal("a commit whose events were never acknowledged returned nil")
	}
}
