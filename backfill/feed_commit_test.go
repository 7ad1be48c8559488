package backfill

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// fakeCommitter is a fakeEntry that commits (exactly-once): a commit
// acknowledges every row handed over, then keeps its progress.
type fakeCommitter struct {
	fakeEntry
	mu      sync.Mutex
	acked   int
	commits []Progress
	fail    error // every commit fails with it
}

func (c *fakeCommitter) Commit(_ context.Context, p Progress) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	for _, done := range c.dones[c.acked:] {
		done()
	}
	c.acked = len(c.dones)
	c.commits = append(c.commits, p)
	return nil
}

func (c *fakeCommitter) committed() []Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Progress(nil), c.commits...)
}

func committingFeed(entry *fakeCommitter) (*feed, *fakeStore) {
	p := &Plan{cfg: Config{Target: slot.Target{Tables: []decode.Table{testTable}}, DrainTimeout: time.Second, CommitInterval: 10 * time.Millisecond},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f := p.newFeed(State{Table: "public.outbox", Phase: PhaseRunning, Done: 10, ConsistentPoint: 7}, entry)
	store := &fakeStore{}
	f.store = store
	return f, store
}

// TestFeedCommitsWhileTheReadWaits: with a Committer, rows handed over
// commit every CommitInterval even while the read waits for its next row
// (a sparse predicate): a Kafka transaction must not outlive its timeout.
// The progress table records each commit after it; the read's end
// commits the rest with the table finished.
func TestFeedCommitsWhileTheReadWaits(t *testing.T) {
	entry := &fakeCommitter{fakeEntry: fakeEntry{failAt: -1}}
	f, store := committingFeed(entry)
	ctx := context.Background()
	stop := f.startCommits(ctx, func(err error) { t.Errorf("a commit failed: %v", err) })
	if err := feedRows(ctx, f, 3, -1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(entry.committed()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // no row comes meanwhile
	}
	stop()
	commits := entry.committed()
	if len(commits) != 1 || commits[0].Done != 13 || *commits[0].After.Values[0] != "2" || commits[0].Finished || commits[0].ConsistentPoint != 7 {
		t.Fatalf("commits while the read waits: %+v, want one of 13 rows through row 2, unfinished", commits)
	}
	f.mu.Lock()
	if len(store.saved) != 1 || store.saved[0].Done != 13 {
		t.Errorf("recorded %+v, want the commit's 13 rows", store.saved)
	}
	f.mu.Unlock()
	if err := f.finish(ctx, nil); err != nil {
		t.Fatal(err)
	}
	commits = entry.committed()
	if last := commits[len(commits)-1]; !last.Finished || last.Done != 13 {
		t.Errorf("last commit %+v, want the table finished at 13", last)
	}
	if last := store.saved[len(store.saved)-1]; last.Phase != PhaseDone || last.Done != 13 {
		t.Errorf("last recorded %+v, want done at 13", last)
	}
}

// TestFeedCommitFailure: a commit that fails ends the read, commits
// nothing more, records nothing, and is the backfill's error; a stop
// commits what was handed over, unfinished.
func TestFeedCommitFailure(t *testing.T) {
	errCommit := errors.New("producer fenced")
	entry := &fakeCommitter{fakeEntry: fakeEntry{failAt: -1}, fail: errCommit}
	f, store := committingFeed(entry)
	ctx, fail := context.WithCancelCause(context.Background())
	stop := f.startCommits(context.Background(), fail)
	if err := feedRows(ctx, f, 2, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the read was not ended by the failed commit")
	}
	stop()
	err := f.finish(context.Background(), context.Cause(ctx))
	if err == nil || !errors.Is(err, errCommit) || !strings.Contains(err.Error(), "0 of 2 rows committed") {
		t.Errorf("finish: %v, want the commit's failure", err)
	}
	if len(store.saved) != 0 {
		t.Errorf("recorded %+v after a failed commit", store.saved)
	}

	entry = &fakeCommitter{fakeEntry: fakeEntry{failAt: -1}}
	f, store = committingFeed(entry)
	stopped, cancel := context.WithCancel(context.Background())
	if err := feedRows(stopped, f, 4, -1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := f.finish(stopped, nil); err != nil {
		t.Fatalf("finish after a stop: %v", err)
	}
	if c := entry.committed(); len(c) != 1 || c[0].Done != 14 || c[0].Finished {
		t.Errorf("commits after a stop: %+v, want 14 rows, unfinished", c)
	}
	if n := len(store.saved); n != 1 || store.saved[0].Phase != PhaseRunning {
		t.Errorf("recorded %+v after a stop, want one state, running", store.saved)
	}
}
