package dlq

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseOffsets(t *testing.T) {
	for _, tt := range []struct {
		in, want, err string
	}{
		{in: "0", want: "map[0:0-]"},
		{in: "0:5", want: "map[0:5-5]"},
		{in: "0:5-9, 2:7-", want: "map[0:5-9 2:7-]"},
		{in: "1:0-0", want: "map[1:0-0]"},
		{in: "", err: "no partition"},
		{in: "x", err: `"x": want PARTITION`},
		{in: "-1:3", err: "want PARTITION"},
		{in: "0:9-5", err: "want a number from 9"},
		{in: "0:a-5", err: `offset "a"`},
		{in: "0:-5", err: `offset ""`},
		{in: "0:1,0:2", err: "partition 0 is given twice"},
	} {
		got, err := ParseOffsets(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseOffsets(%q) = %v, %v; want error %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || fmt.Sprint(got) != tt.want):
			t.Errorf("ParseOffsets(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestSelection(t *testing.T) {
	every := Selection{Offsets: Range{From: 3, To: 5}}
	some := Selection{Offsets: All, Partitions: map[int32]Range{1: {From: 2, To: -1}}, Reasons: []string{"message_too_large", "topic_missing"}}
	for _, tt := range []struct {
		sel    Selection
		p      int32
		offset int64
		want   bool
	}{
		{every, 0, 2, false},
		{every, 0, 3, true},
		{every, 7, 5, true},
		{every, 7, 6, false},
		{some, 0, 5, false}, // a partition not named
		{some, 1, 1, false},
		{some, 1, 1 << 40, true},
		{Everything, 9, 0, true},
	} {
		r, ok := tt.sel.rangeOf(tt.p)
		if got := ok && r.contains(tt.offset); got != tt.want {
			t.Errorf("%+v: %d/%d selected %v, want %v", tt.sel, tt.p, tt.offset, got, tt.want)
		}
	}
	if !some.matches("topic_missing") || some.matches("null_column") || some.matches("") || !every.matches("anything") {
		t.Errorf("reasons: %v should match exactly its own; no reasons match every one", some.Reasons)
	}
}
