package checkpoint

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func TestConfirmAtTransactionBoundaries(t *testing.T) {
	// Three transactions: T1 (events 0,1) ends at 100, T2 (event 2) at 200,
	// T3 (events 3,4) at 300. Acks arrive out of order.
	tr := New(10, 100, 1<<20)
	reserve := func() Seq {
		s, err := tr.Reserve(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tr.Begin()
	e0, e1 := reserve(), reserve()
	tr.Commit(100)
	tr.Begin()
	e2 := reserve()
	tr.Commit(200)
	tr.Begin()
	e3, e4 := reserve(), reserve()
	tr.Commit(300)

	steps := []struct {
		ack  Seq
		want pglogrepl.LSN
	}{
		{e2, 10},  // T2 acked, but T1 is not: nothing moves
		{e4, 10},  // part of T3
		{e1, 10},  // part of T1
		{e0, 200}, // T1 complete, and T2 behind it
		{e0, 200}, // a repeated ack changes nothing
		{e3, 300}, // T3 complete
	}
	for i, s := range steps {
		tr.Ack(s.ack)
		if got := tr.Confirmed(); got != s.want {
			t.Fatalf("step %d (ack %d): confirmed %s, want %s", i, s.ack, got, s.want)
		}
	}
}

func TestEmptyTransactionsConfirmBehindTheirPredecessors(t *testing.T) {
	tr := New(5, 10, 1<<20)
	tr.Begin()
	e0, _ := tr.Reserve(context.Background(), 1)
	tr.Commit(100)
	for end := pglogrepl.LSN(110); end < 200; end += 10 { // transactions without outbox rows
		tr.Begin()
		tr.Commit(end)
	}
	if got := tr.Confirmed(); got != 5 {
		t.Fatalf("confirmed %s before the first event was acked, want 0/5", got)
	}
	if n := len(tr.pending); n != 1 {
		t.Fatalf("%d pending entries for one event and ten empty transactions, want them coalesced into 1", n)
	}
	tr.Ack(e0)
	if got := tr.Confirmed(); got != 190 {
		t.Fatalf("confirmed %s, want 190 (the last empty transaction)", got)
	}
}

func TestConfirmIdleOnlyWhenNothingIsOwed(t *testing.T) {
	tr := New(5, 10, 1<<20)
	if got := tr.ConfirmIdle(50); got != 50 {
		t.Fatalf("idle: confirmed %s, want the keepalive's 50", got)
	}
	tr.Begin()
	if got := tr.ConfirmIdle(60); got != 50 {
		t.Fatalf("open transaction: confirmed %s, want 50 (the server may be past its commit)", got)
	}
	e, _ := tr.Reserve(context.Background(), 1)
	tr.Commit(70)
	if got := tr.ConfirmIdle(80); got != 50 {
		t.Fatalf("unacked event: confirmed %s, want 50", got)
	}
	tr.Ack(e)
	if got := tr.ConfirmIdle(90); got != 90 {
		t.Fatalf("all acked: confirmed %s, want 90", got)
	}
	if got := tr.ConfirmIdle(40); got != 90 {
		t.Fatalf("older keepalive moved confirmed back to %s", got)
	}
}

func TestReserveBlocksWhenTheWindowIsFull(t *testing.T) {
	tr := New(0, 2, 100)
	ctx := context.Background()
	a, _ := tr.Reserve(ctx, 10)
	tr.Reserve(ctx, 10)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Reserve(short, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third reserve in a window of 2: %v, want it to block until the deadline", err)
	}
	got := make(chan Seq)
	go func() {
		s, _ := tr.Reserve(ctx, 10)
		got <- s
	}()
	tr.Ack(a)
	select {
	case s := <-got:
		if s != 2 {
			t.Fatalf("reserved seq %d, want 2", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reserve did not wake after an ack")
	}
}

func TestReserveBoundsBytes(t *testing.T) {
	tr := New(0, 100, 100)
	ctx := context.Background()
	big, _ := tr.Reserve(ctx, 500) // alone in the window: admitted although larger than the bound
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Reserve(short, 1); err == nil {
		t.Fatal("reserve admitted past the byte bound")
	}
	tr.Ack(big)
	if _, bytes := tr.InFlight(); bytes != 0 {
		t.Fatalf("%d bytes in flight after every ack", bytes)
	}
	if _, err := tr.Reserve(ctx, 60); err != nil {
		t.Fatal(err)
	}
}

// TestNeverConfirmsPastAGap runs random interleavings of transactions and
// acks in random order, checking after every ack that the confirmed
// position is exactly the end of the newest transaction whose events, and all
// events before them, are acked.
func TestNeverConfirmsPastAGap(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		window := 1 + rng.IntN(20)
		tr := New(1, window, 1<<30)
		type txn struct {
			last Seq // one past its last event
			end  pglogrepl.LSN
		}
		var txns []txn
		var unacked []Seq
		acked := map[Seq]bool{}
		end := pglogrepl.LSN(1)
		next := Seq(0)
		low := Seq(0) // every seq below low is acked
		check := func() {
			// Expected: the newest txn all of whose events and all before are acked.
			for acked[low] {
				low++
			}
			want := pglogrepl.LSN(1)
			for _, x := range txns {
				if x.last > low {
					break
				}
				want = x.end
			}
			if got := tr.Confirmed(); got != want {
				t.Fatalf("seed %d: confirmed %s, want %s", seed, got, want)
			}
		}
		for range 300 {
			// The window counts from the oldest unacked event: acked events
			// behind it still hold their place.
			if room := window - int(next-low); rng.IntN(3) > 0 && room > 0 {
				// Start and commit a transaction of up to the room left.
				tr.Begin()
				n := rng.IntN(room + 1)
				for range n {
					s, err := tr.Reserve(context.Background(), 1)
					if err != nil || s != next {
						t.Fatalf("seed %d: reserve got %d, %v; want %d", seed, s, err, next)
					}
					unacked = append(unacked, s)
					next++
				}
				end += pglogrepl.LSN(1 + rng.IntN(100))
				tr.Commit(end)
				txns = append(txns, txn{last: next, end: end})
			} else if len(unacked) > 0 {
				i := rng.IntN(len(unacked))
				s := unacked[i]
				unacked = append(unacked[:i], unacked[i+1:]...)
				acked[s] = true
				tr.Ack(s)
			}
			check()
		}
	}
}
