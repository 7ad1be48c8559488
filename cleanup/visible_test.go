package cleanup

import (
	"slices"
	"testing"
)

// A row a statement did not find is settled as gone only once a statement
// run after its transaction was seen ended missed it too: the status is
// read after the statement, and a commit that became visible in between
// reads "committed" although the statement could not see its row.
func TestUnseenRowsAreCleanedAgainBeforeTakenForGone(t *testing.T) {
	r := func(id string, xid uint32) row { return row{table: "public.outbox", id: id, xid: xid} }
	batch := []settled{
		{seq: 1, row: r("found", 10), act: clean},
		{seq: 2, row: r("running", 11), act: clean},
		{seq: 3, row: r("ended", 12), act: clean},
		{seq: 4, row: r("gone", 13), act: clean, rechecked: true},
		{seq: 5, row: r("unknown-xid", 0), act: clean},
		{seq: 6, row: r("kept", 14), act: keep},
	}
	found := map[row]bool{{table: "public.outbox", id: "found"}: true}
	running := map[uint32]bool{11: true}

	settle, again := sortUnseen(batch, found, running)
	seqs := func(ss []settled) (out []uint64) {
		for _, s := range ss {
			out = append(out, s.seq)
		}
		return out
	}
	if got, want := seqs(settle), []uint64{1, 4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("settled %v, want %v", got, want)
	}
	if got, want := seqs(again), []uint64{2, 3}; !slices.Equal(got, want) {
		t.Errorf("cleaned again %v, want %v", got, want)
	}
	for _, s := range again {
		if s.rechecked != (s.seq == 3) {
			t.Errorf("seq %d rechecked %v: only a row whose transaction was seen ended is rechecked", s.seq, s.rechecked)
		}
	}
	// The row of the ended transaction, missed again: gone.
	settle, again = sortUnseen(again[1:], found, running)
	if len(settle) != 1 || settle[0].seq != 3 || len(again) != 0 {
		t.Errorf("a rechecked row missed again: settled %v, again %v; want it settled", seqs(settle), seqs(again))
	}
}
