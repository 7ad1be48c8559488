package dlq

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/outbox-cdc/outbox-cdc/internal/units"
)

// WriteList prints entries for people: a count by reason, then a table
// of where each sits, why, what it was meant for and its size.
func WriteList(w io.Writer, topic string, entries []Entry) {
	reasons := map[string]int{}
	for _, e := range entries {
		reasons[e.Reason]++
	}
	var counts []string
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		counts = append(counts, fmt.Sprintf("%s %d", cell(r), reasons[r]))
	}
	fmt.Fprintf(w, "dead-letter topic %s: %d dead letters chosen", topic, len(entries))
	if len(counts) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(counts, ", "))
	}
	fmt.Fprintln(w)
	if len(entries) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPARTITION/OFFSET\tREASON\tMEANT FOR\tTABLE\tID\tKEY\tSIZE")
	for _, e := range entries {
		size := units.Bytes(int64(e.Size))
		if strings.Contains(e.Truncated, "value") {
			size += ", value left out"
		}
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Partition, e.Offset, cell(e.Reason), cell(e.Topic), cell(e.Table), cell(e.ID), key(e), size)
	}
	tw.Flush()
}

// shown bounds the skipped and failed dead letters printed one by one.
const shown = 20

// WriteText prints the report for people: what was replayed to each
// topic, the first skipped and failed dead letters with why, and the totals.
func (rep *Report) WriteText(w io.Writer) {
	verb := "replayed"
	if rep.DryRun {
		verb = "would replay"
		fmt.Fprintln(w, "dry run: nothing is published")
	}
	total := 0
	for _, topic := range slices.Sorted(maps.Keys(rep.Replayed)) {
		fmt.Fprintf(w, "%s %d to %s\n", verb, rep.Replayed[topic], cell(topic))
		total += rep.Replayed[topic]
	}
	for _, what := range []struct {
		name    string
		n       int
		actions []string
	}{{"skipped", rep.Skipped, []string{Skipped}}, {"failed", rep.Failed, []string{Failed, HeldBack}}} {
		if what.n > 0 {
			fmt.Fprintf(w, "%s %d:\n", what.name, what.n)
		}
		i := 0
		for _, o := range rep.Outcomes {
			if !slices.Contains(what.actions, o.Action) {
				continue
			}
			if i++; i > shown {
				fmt.Fprintf(w, "  … and %d more (--json lists them all)\n", what.n-shown)
				break
			}
			to := ""
			if o.To != "" {
				to = " to " + cell(o.To)
			}
			fmt.Fprintf(w, "  %d/%d (%s, id %s)%s: %s\n", o.Partition, o.Offset, cell(o.Reason), cell(o.ID), to, sentence(o.Why))
		}
	}
	fmt.Fprintf(w, "%d %s, %d skipped, %d failed\n", total, verb, rep.Skipped, rep.Failed)
}

// cell is a value a dead letter's headers or key hold, as a table cell
// or a word of a line: "-" when empty, quoted (strconv.Quote) when it
// holds a space, a quote or anything a terminal would act on instead of
// print (a line break, an ANSI escape, a tab, a right-to-left override),
// as it is otherwise. These values come from rows, and an operator reads
// them in a terminal: quoted, one dead letter stays one line and cannot
// recolour or clear the screen.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s || strings.ContainsAny(s, " ") {
		return q
	}
	return s
}

// sentence is a line of text that may quote row values (an outcome's
// why): as it is when every character is printable, else quoted whole.
func sentence(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func key(e Entry) string {
	if e.NullKey {
		return "(null)"
	}
	k := e.Key
	if len(k) > 40 {
		k = k[:40] + "…"
	}
	if k == "" {
		return `""`
	}
	return cell(k)
}
