package checkpoint

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckXid: a checkpoint whose transaction id the server has not
// assigned yet (at or past its next id, widened to the server's epoch,
// across a wraparound too) is refused; one the server assigned is fine; a
// record naming no transaction is not checked.
func TestCheckXid(t *testing.T) {
	epoch := func(e uint64, xid uint32) uint64 { return e<<32 | uint64(xid) }
	tests := []struct {
		name        string
		xid         uint32
		next        uint64
		wantChecked bool
		wantRefused bool
		says        []string // in the error
	}{
		{"assigned, just before the next id", 99, epoch(5, 100), true, false, nil},
		{"assigned, long ago in the same epoch", 3, epoch(5, 100), true, false, nil},
		{"assigned in the previous epoch, before the wraparound", 4294967000, epoch(5, 100), true, false, nil},
		{"the next id itself", 100, epoch(5, 100), true, true, []string{"xid 100", "21474836580", "21474836580"}},
		{"ahead of the next id", 150, epoch(5, 100), true, true, []string{"xid 150", "21474836630", "next transaction id is 21474836580", "restored"}},
		{"ahead, across the wraparound", 20, epoch(4, 0xFFFFFFF0), true, true, []string{"xid 20", "21474836500", "21474836464"}},
		{"ahead, before the wraparound", 0xFFFFFFF8, epoch(4, 0xFFFFFFF0), true, true, []string{"xid 4294967288"}},
		{"before the first epoch: never assigned", 4000000000, epoch(0, 1000), true, true, []string{"xid 4000000000", "next transaction id is 1000"}},
		{"far behind in the first epoch", 3, epoch(0, 1000), true, false, nil},
		{"no transaction id", 0, epoch(5, 100), false, false, nil},
		{"the frozen id", 2, epoch(0, 1000), false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := sample()
			rec.Xid = tt.xid
			checked, err := rec.HasXid(), CheckXid(rec, tt.next)
			if checked != tt.wantChecked || errors.Is(err, ErrRestored) != tt.wantRefused || (err != nil) != tt.wantRefused {
				t.Fatalf("xid %d, next %d: checked %v, %v; want checked %v, refused %v", tt.xid, tt.next, checked, err, tt.wantChecked, tt.wantRefused)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q: %v", s, err)
				}
			}
		})
	}
}
