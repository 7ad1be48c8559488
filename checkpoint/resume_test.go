package checkpoint

import (
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestResume(t *testing.T) {
	const slot = pglogrepl.LSN(0x5000)
	here := System{ID: "7312345678901234567", Timeline: 2}
	at := func(end pglogrepl.LSN, edit func(*Record)) Record {
		r := Record{SystemID: here.ID, Timeline: here.Timeline, Slot: "s", CommitLSN: end - 0x30, EndLSN: end, Xid: 9}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	tests := []struct {
		name      string
		rec       Record
		found     bool
		wantStart pglogrepl.LSN
		wantWarn  bool
		says      []string // in the reason
	}{
		{"no checkpoint", Record{}, false, slot, true, []string{"no checkpoint", "trusting the slot at 0/5000", "may repeat"}},
		{"another system", at(0x6000, func(r *Record) { r.SystemID = "6999" }), true, slot, true,
			[]string{"system 6999", "system 7312345678901234567", "trusting the slot", "may repeat"}},
		{"an earlier timeline, ahead of the slot", at(0x6000, func(r *Record) { r.Timeline = 1 }), true, slot, true,
			[]string{"timeline 1", "timeline 2", "trusting the slot"}},
		{"a later timeline", at(0x6000, func(r *Record) { r.Timeline = 3 }), true, slot, true, []string{"timeline 3", "timeline 2"}},
		{"an earlier timeline, behind the slot", at(0x4000, func(r *Record) { r.Timeline = 1 }), true, slot, true, []string{"timeline 1"}},
		{"at the slot", at(slot, nil), true, slot, false, []string{"matches the slot"}},
		{"behind the slot", at(0x4fff, nil), true, slot, false, []string{"0/4FFF", "behind the slot at 0/5000", "starting at the slot"}},
		{"ahead of the slot", at(0x6000, nil), true, 0x6000, false, []string{"0/6000", "ahead of the slot at 0/5000", "skipping"}},
		{"ahead, but found false", at(0x6000, nil), false, slot, true, []string{"no checkpoint"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Resume(slot, here, tt.rec, tt.found)
			if d.Start != tt.wantStart || d.Warn != tt.wantWarn {
				t.Errorf("start %s warn %v, want %s warn %v (%s)", d.Start, d.Warn, tt.wantStart, tt.wantWarn, d.Reason)
			}
			for _, s := range tt.says {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason %q does not say %q", d.Reason, s)
				}
			}
		})
	}
}

// After a promotion the server's timeline history says where it branched
// from the checkpoint's timeline: the checkpoint is trusted up to the lower
// of its end and that point (the history both share), and WAL of the old
// timeline past the point (transactions Kafka holds that the server never
// had) is reported as ghosts.
func TestResumeAfterFailover(t *testing.T) {
	const slot = pglogrepl.LSN(0x5000)
	here := System{ID: "7312345678901234567", Timeline: 2, Switches: map[int32]pglogrepl.LSN{1: 0x5800}}
	at := func(timeline int32, end pglogrepl.LSN) Record {
		return Record{SystemID: here.ID, Timeline: timeline, Slot: "s", CommitLSN: end - 0x30, EndLSN: end, Xid: 9}
	}
	tests := []struct {
		name       string
		rec        Record
		branch     pglogrepl.LSN // here's switch point from timeline 1, 0: as above
		wantStart  pglogrepl.LSN
		wantWarn   bool
		wantGhosts *Ghosts
		says       []string
	}{
		{"ancestor, ahead of the slot, before the branch", at(1, 0x5400), 0, 0x5400, false, nil,
			[]string{"timeline 1", "branched at 0/5800", "starting at the checkpoint"}},
		{"ancestor, past the branch", at(1, 0x6000), 0, 0x5800, true, &Ghosts{Timeline: 1, From: 0x5800, To: 0x6000},
			[]string{"0/5800", "0/6000", "never had"}},
		{"ancestor, behind the slot", at(1, 0x4000), 0, slot, false, nil, []string{"behind the slot"}},
		{"ancestor, past a branch behind the slot", at(1, 0x6000), 0x4800, slot, true, &Ghosts{Timeline: 1, From: 0x4800, To: 0x6000},
			[]string{"0/4800", "never had"}},
		{"not an ancestor", at(3, 0x5400), 0, slot, true, nil, []string{"timeline 3", "not an ancestor", "trusting the slot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := here
			if tt.branch != 0 {
				sys.Switches = map[int32]pglogrepl.LSN{1: tt.branch}
			}
			d := Resume(slot, sys, tt.rec, true)
			if d.Start != tt.wantStart || d.Warn != tt.wantWarn {
				t.Errorf("start %s warn %v, want %s warn %v (%s)", d.Start, d.Warn, tt.wantStart, tt.wantWarn, d.Reason)
			}
			if (d.Ghosts == nil) != (tt.wantGhosts == nil) || d.Ghosts != nil && *d.Ghosts != *tt.wantGhosts {
				t.Errorf("ghosts %+v, want %+v", d.Ghosts, tt.wantGhosts)
			}
			for _, s := range tt.says {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason %q does not say %q", d.Reason, s)
				}
			}
		})
	}
}
