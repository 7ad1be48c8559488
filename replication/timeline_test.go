package replication

import (
	"context"
	"testing"
)

// The history file Postgres writes on a promotion: a line per ancestor
// timeline and the LSN where it ended in this server's history.
func TestParseHistory(t *testing.T) {
	content := []byte("1\t0/3000158\tno recovery target specified\n\n# a comment\n2\t0/5A0B1C8\tat restore point \"before\"\n")
	got, err := parseHistory(content)
	if err != nil {
		t.Fatal(err)
	}
	want := Switches{1: 0x3000158, 2: 0x5A0B1C8}
	if len(got) != len(want) || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("parseHistory = %v, want %v", got, want)
	}
	for _, bad := range []string{"x\t0/1\treason\n", "1\tnot-an-lsn\treason\n", "1\n", "0\t0/1\treason\n"} {
		if _, err := parseHistory([]byte(bad)); err == nil {
			t.Errorf("parseHistory(%q): no error", bad)
		}
	}
}

// Stream.Switches reads the history of the server's timeline, and none on
// timeline 1.
func TestSwitchesReadTheHistory(t *testing.T) {
	for _, tt := range []struct {
		timeline int32
		history  string
		want     Switches
	}{
		{1, "", Switches{}},
		{3, "1\t0/3000158\tno recovery target specified\n2\t0/5000000\tno recovery target specified\n", Switches{1: 0x3000158, 2: 0x5000000}},
	} {
		f := newFakeConn(nil)
		f.history = []byte(tt.history)
		s := &Stream{conn: f}
		got, err := s.Switches(context.Background(), tt.timeline)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) || got[1] != tt.want[1] || got[2] != tt.want[2] {
			t.Errorf("timeline %d: switches %v, want %v", tt.timeline, got, tt.want)
		}
	}
}
