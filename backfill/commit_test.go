package backfill

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// TestCommitted: a resume takes the last commit's progress over the
// progress table's only when it names the same backfill (table, point and
// snapshot) and is ahead of it; with CleanGap, the rows between the two
// are left to clean.
func TestCommitted(t *testing.T) {
	recorded := State{Table: "public.outbox", Phase: PhaseRunning, ConsistentPoint: 100, Snapshot: "10:20:", Done: 5, After: &Key{Values: []*string{ptr("5")}}}
	ahead := Progress{Table: "public.outbox", ConsistentPoint: 100, Snapshot: "10:20:", Done: 9, After: &Key{Values: []*string{ptr("9")}}}
	for _, tc := range []struct {
		name     string
		commit   *Progress
		cleanGap bool
		wantDone int64
		wantGap  bool
	}{
		{name: "no commit", wantDone: 5},
		{name: "ahead: taken", commit: &ahead, wantDone: 9},
		{name: "ahead, with cleanup: the rows between left to clean", commit: &ahead, cleanGap: true, wantDone: 9, wantGap: true},
		{name: "another table", commit: with(ahead, func(p *Progress) { p.Table = "public.other" }), wantDone: 5},
		{name: "another point: a slot created again", commit: with(ahead, func(p *Progress) { p.ConsistentPoint = 99 }), wantDone: 5},
		{name: "another snapshot: an earlier backfill at the same point", commit: with(ahead, func(p *Progress) { p.Snapshot = "9:9:" }), wantDone: 5},
		{name: "behind: recorded since in at-least-once", commit: with(ahead, func(p *Progress) { p.Done = 3 }), wantDone: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			p := &Plan{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{CleanGap: tc.cleanGap,
				Committed: func(context.Context) (*Progress, error) { asked++; return tc.commit, nil }}}
			j := &job{}
			for range 2 { // asked once
				st, finished, err := p.committed(context.Background(), j, recorded)
				if err != nil || finished {
					t.Fatalf("committed: finished %v, %v", finished, err)
				}
				if st.Done != tc.wantDone {
					t.Errorf("resumes at %d rows, want %d", st.Done, tc.wantDone)
				}
			}
			if asked != 1 {
				t.Errorf("Committed asked %d times, want once", asked)
			}
			if (j.gap != nil) != tc.wantGap || tc.wantGap && (j.gap.from != recorded.After || j.gap.until != ahead.After) {
				t.Errorf("gap %+v, want one from the recorded key to the commit's: %v", j.gap, tc.wantGap)
			}
		})
	}
}

func with(p Progress, edit func(*Progress)) *Progress {
	edit(&p)
	return &p
}
