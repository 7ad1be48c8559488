package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/backfill"
)

// TestStatusShowsLastHeal: status's text and JSON name the last heal's
// time, cause and rows; a heal begun and not ended says so; none, no line.
func TestStatusShowsLastHeal(t *testing.T) {
	started := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	finished := started.Add(42 * time.Second)
	cases := []struct {
		name string
		heal *backfill.HealRecord
		want string // "" for no line
	}{
		{"never healed", nil, ""},
		{"recorded, never healed", &backfill.HealRecord{Slot: "s"}, ""},
		{"healed", &backfill.HealRecord{Slot: "s", Heals: 1, Cause: "wal_removed", Started: &started, Finished: &finished, Rows: 120},
			"2025-03-01T10:00:42Z (cause wal_removed): 120 rows published again, 1 heal(s) in all"},
		{"under way", &backfill.HealRecord{Slot: "s", Cause: "dropped", Started: &started}, "under way or cut short (cause dropped)"},
	}
	for _, c := range cases {
		r := StatusReport{LastHeal: c.heal}
		var got string
		for _, l := range r.Lines() {
			if l.Label == "last heal" {
				got = l.Text
			}
		}
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	b, err := json.Marshal(StatusReport{LastHeal: cases[2].heal})
	if err != nil || !strings.Contains(string(b), `"last_heal":{"slot":"s"`) || !strings.Contains(string(b), `"cause":"wal_removed"`) {
		t.Errorf("JSON %s (%v): want last_heal with its cause", b, err)
	}
}
