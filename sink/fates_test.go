package sink

import (
	"context"
	"sync"
	"testing"
)

// fates collects what a Writer reports of each event: a test passes
// fates.done as the Writer's Done and waits for want acknowledgements.
type fates struct {
	want  int
	mu    sync.Mutex
	acked map[uint64]int
	order []uint64 // tokens in the order they were acknowledged
	fail  []error
	all   chan struct{}
}

func newFates(want int) *fates {
	return &fates{want: want, acked: make(map[uint64]int, want), all: make(chan struct{})}
}

func (f *fates) done(token uint64, _ string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.fail = append(f.fail, err)
		return
	}
	f.acked[token]++
	f.order = append(f.order, token)
	if len(f.acked) == f.want {
		close(f.all)
	}
}

// wait waits until every event was acknowledged, then closes w, and fails
// the test if any event was acknowledged twice or reported failed.
func (f *fates) wait(ctx context.Context, t *testing.T, w *Writer) {
	t.Helper()
	select {
	case <-f.all:
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("%d of %d events acknowledged before the deadline; failures: %v", len(f.acked), f.want, f.fail)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for token, n := range f.acked {
		if n != 1 {
			t.Errorf("event %d acknowledged %d times", token, n)
		}
	}
	if len(f.fail) > 0 {
		t.Errorf("%d failures reported for retriable errors: %v", len(f.fail), f.fail[0])
	}
}
