package sink

import (
	"context"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"
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

// outcomes collects every fate a Writer reports, failures included: tests
// where some events must fail pass outcomes.done as the Writer's Done.
type outcomes struct {
	mu      sync.Mutex
	fates   map[uint64]outcome
	order   []uint64 // tokens acknowledged (published or dead-lettered), in order
	changed chan struct{}
}

type outcome struct {
	reason string
	err    error
	times  int // fates reported for the token
}

func newOutcomes() *outcomes {
	return &outcomes{fates: map[uint64]outcome{}, changed: make(chan struct{}, 1)}
}

func (o *outcomes) done(token uint64, reason string, err error) {
	o.mu.Lock()
	f := o.fates[token]
	f.reason, f.err, f.times = reason, err, f.times+1
	o.fates[token] = f
	if err == nil {
		o.order = append(o.order, token)
	}
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// wait waits until n tokens have a fate, failing the test at ctx's end.
func (o *outcomes) wait(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for {
		o.mu.Lock()
		got := len(o.fates)
		o.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-o.changed:
		case <-ctx.Done():
			o.mu.Lock()
			var missing []uint64
			for i := uint64(0); i < uint64(n); i++ {
				if _, ok := o.fates[i]; !ok {
					missing = append(missing, i)
				}
			}
			o.mu.Unlock()
			t.Fatalf("%d of %d events have a fate before the deadline; missing %v", got, n, missing)
		}
	}
}

// get returns token's fate.
func (o *outcomes) get(token uint64) (outcome, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f, ok := o.fates[token]
	return f, ok
}

// headerOf returns the value of the header key.
func headerOf(hs []kafka.Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
