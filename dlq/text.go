package dlq

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

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
		counts = append(counts, fmt.Sprintf("%s %d", orNone(r), reasons[r]))
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
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Partition, e.Offset, orNone(e.Reason), orNone(e.Topic), orNone(e.Table), orNone(e.ID), key(e), size)
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
		fmt.Fprintf(w, "%s %d to %s\n", verb, rep.Replayed[topic], topic)
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
				to = " to " + o.To
			}
			fmt.Fprintf(w, "  %d/%d (%s, id %s)%s: %s\n", o.Partition, o.Offset, orNone(o.Reason), orNone(o.ID), to, o.Why)
		}
	}
	fmt.Fprintf(w, "%d %s, %d skipped, %d failed\n", total, verb, rep.Skipped, rep.Failed)
}

func orNone(s string) string {
	if s == "" {
		return "-"
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
	if q := strconv.Quote(k); q[1:len(q)-1] != k || k == "" || strings.ContainsAny(k, " \t") {
		return q
	}
	return k
}
