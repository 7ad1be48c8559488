package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
)

// fakeCleaner counts held rows and answers Release with err.
type fakeCleaner struct {
	held     atomic.Int64
	err      error
	released int
}

func (f *fakeCleaner) Held() int                 { return int(f.held.Load()) }
func (f *fakeCleaner) Commit() cleanup.Committed { return cleanup.Committed{} }
func (f *fakeCleaner) CloseRelease()             {}
func (f *fakeCleaner) Release(context.Context, cleanup.Committed) error {
	f.released++
	return f.err
}

// TestExactlyWaitsForCleaning: while a commit's rows are being cleaned, a
// new Postgres transaction waits once --max-in-flight rows wait for the
// next commit, and goes on once the cleaning ends; below the bound it does
// not wait.
func TestExactlyWaitsForCleaning(t *testing.T) {
	x := newExactly(checkpoint.New(0x100, 10, 1<<20), testConfig(), 0x100, slog.New(slog.DiscardHandler))
	f := &fakeCleaner{}
	x.clean, x.heldLimit = f, 5
	done := make(chan struct{})
	x.settled.Store(&done) // a settle under way
	f.held.Store(5)
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := x.Enter(short); !errors.Is(err, context.DeadlineExceeded) || x.held {
		t.Fatalf("entering with 5 rows held at a bound of 5 while cleaning: %v (held %v), want to wait", err, x.held)
	}
	f.held.Store(4)
	if err := x.Enter(context.Background()); err != nil {
		t.Fatalf("entering below the bound: %v", err)
	}
	x.Leave(0x200)

	f.held.Store(9)
	entered := make(chan error, 1)
	go func() { entered <- x.Enter(context.Background()) }()
	select {
	case err := <-entered:
		t.Fatalf("entered (%v) while cleaning with 9 rows held", err)
	case <-time.After(50 * time.Millisecond):
	}
	x.settled.Store(nil)
	close(done)
	select {
	case err := <-entered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5 s after the cleaning ended")
	}
	x.Leave(0x300)
}

// TestExactlySettle: a settle that cleans raises the position to its
// commit and ends the wait; one that fails keeps the position, ends the
// wait, and refuses the next commit.
func TestExactlySettle(t *testing.T) {
	for _, fail := range []bool{false, true} {
		x := newExactly(checkpoint.New(0x100, 10, 1<<20), testConfig(), 0x100, slog.New(slog.DiscardHandler))
		f := &fakeCleaner{}
		if fail {
			f.err = errors.New("delete refused")
		}
		done := make(chan struct{})
		x.clean, x.heldLimit = f, 5
		x.settling, x.cleanEnd = true, 0x400
		x.settled.Store(&done)
		x.cleaning.Store(true)
		err := x.settle()
		select {
		case <-done:
		default:
			t.Errorf("fail %v: the wait did not end", fail)
		}
		if x.settled.Load() != nil {
			t.Errorf("fail %v: a settle still under way", fail)
		}
		got := x.Confirmed()
		switch {
		case !fail && (err != nil || got != 0x400 || x.settling):
			t.Errorf("clean settle: %v, confirmed %s, settling %v; want nil, 0/400, false", err, got, x.settling)
		case fail && (err == nil || got != 0x100 || !x.settling):
			t.Errorf("failed settle: %v, confirmed %s, settling %v; want the error, 0/100, true", err, got, x.settling)
		}
		if fail {
			x.uncommitted.Add(1)
			if err := x.commit(); err == nil {
				t.Error("a commit after a failed settle went ahead")
			}
		}
	}
}
