package dlq

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// forged are values a row decides (its id, the topic it routes to, its
// table's name is the operator's, but the text comes from a header) that
// would draw on an operator's terminal if printed as they are: a new line
// that looks like another dead letter, ANSI escapes that clear the screen
// or recolour, a tab that shifts the columns, a right-to-left override.
var forged = []string{
	"e-1\n7/99     message_too_large  orders  public.outbox  e-2  k  10 B",
	"e-1\x1b[2J\x1b[1;1Hall clear",
	"a\tb",
	"x\u202egpj.exe",
	"\u009b31m",
}

// controls reports the first byte or rune of s that a terminal acts on.
func controls(s string) (string, bool) {
	for _, r := range s {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' {
			return string(r), true
		}
	}
	return "", false
}

// TestListTextQuotesRowValues: dlq list's table prints every value a row
// decides quoted, with its control characters escaped, so that one dead
// letter is one line of its own whatever its row held.
func TestListTextQuotesRowValues(t *testing.T) {
	for _, v := range forged {
		entries := []Entry{{Partition: 0, Offset: 1, Reason: v, Topic: v, Table: v, ID: v, Key: v, Size: 10}}
		var b bytes.Buffer
		WriteList(&b, "dlq", entries)
		out := b.String()
		if c, bad := controls(out); bad {
			t.Errorf("%q: the list prints %q raw:\n%s", v, c, out)
		}
		// The summary, a blank line, the heading and one line per entry.
		if n := strings.Count(out, "\n"); n != 4 {
			t.Errorf("%q: the list has %d lines, want 4 (one dead letter):\n%s", v, n, out)
		}
	}
}

// TestReplayTextQuotesRowValues: the replay report prints the values a
// row decides escaped too: a skipped or failed dead letter is one line.
func TestReplayTextQuotesRowValues(t *testing.T) {
	for _, v := range forged {
		rep := &Report{Replayed: map[string]int{v: 1}, Skipped: 1, Failed: 1, Outcomes: []Outcome{
			{Entry: Entry{Reason: v, ID: v, Topic: v}, To: v, Action: Skipped, Why: "topic " + v + " is refused"},
			{Entry: Entry{Reason: v, ID: v}, To: v, Action: Failed, Why: v},
		}}
		var b bytes.Buffer
		rep.WriteText(&b)
		out := b.String()
		if c, bad := controls(out); bad {
			t.Errorf("%q: the report prints %q raw:\n%s", v, c, out)
		}
		// replayed, skipped 1:, its line, failed 1:, its line, the totals.
		if n := strings.Count(out, "\n"); n != 6 {
			t.Errorf("%q: the report has %d lines, want 6:\n%s", v, n, out)
		}
	}
}

// TestListJSONEscapes: --json needs no quoting of its own: encoding/json
// escapes every C0 control character, and what is not valid UTF-8 becomes
// U+FFFD. (C1 controls and U+202E stay as UTF-8 inside a JSON string,
// which a JSON reader takes as text.)
func TestListJSONEscapes(t *testing.T) {
	for _, v := range append(forged, "\xff\x1b") {
		b, err := json.Marshal(Entry{Reason: v, Topic: v, Table: v, ID: v, Key: v})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range b {
			if c < 0x20 || c == 0x7f {
				t.Errorf("%q: JSON holds byte %#x raw: %s", v, c, b)
			}
		}
		if bytes.Contains(b, []byte{0xff}) {
			t.Errorf("%q: JSON holds invalid UTF-8: %s", v, b)
		}
	}
}
