package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/dlq"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// dlqConfig is where cfg's dead-letter topic is.
func dlqConfig(cfg config.Config) (dlq.Config, error) {
	sec, err := relay.Security(cfg.Kafka)
	return dlq.Config{Brokers: cfg.KafkaBrokers, Security: sec, Topic: cfg.DeadLetterTopic}, err
}

// dlqList runs `outbox-cdc dlq list`.
func dlqList(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "outbox-cdc dlq list: %s\n", red.oneLine(err))
		return exitFailure
	}
	dc, err := dlqConfig(cfg)
	if err != nil {
		return fail(err)
	}
	entries, err := dlq.List(ctx, dc, cfg.DLQ)
	if err != nil {
		return fail(err)
	}
	if cfg.JSON {
		out := struct {
			Topic       string      `json:"topic"`
			DeadLetters []dlq.Entry `json:"dead_letters"`
		}{dc.Topic, entries}
		if out.DeadLetters == nil {
			out.DeadLetters = []dlq.Entry{}
		}
		if err := writeJSON(stdout, out); err != nil {
			return fail(err)
		}
		return exitOK
	}
	reasons := map[string]int{}
	for _, e := range entries {
		reasons[e.Reason]++
	}
	var counts []string
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		counts = append(counts, fmt.Sprintf("%s %d", orNone(r), reasons[r]))
	}
	fmt.Fprintf(stdout, "dead-letter topic %s: %d dead letters chosen", dc.Topic, len(entries))
	if len(counts) > 0 {
		fmt.Fprintf(stdout, " (%s)", strings.Join(counts, ", "))
	}
	fmt.Fprintln(stdout)
	if len(entries) == 0 {
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPARTITION/OFFSET\tREASON\tMEANT FOR\tTABLE\tID\tKEY\tSIZE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Partition, e.Offset, orNone(e.Reason), orNone(e.Topic), orNone(e.Table), orNone(e.ID), key(e), size(e))
	}
	tw.Flush()
	return exitOK
}

// dlqReplay runs `outbox-cdc dlq replay`: exit 1 if any dead letter failed.
func dlqReplay(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	dc, err := dlqConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc dlq replay: %s\n", red.oneLine(err))
		return exitFailure
	}
	rep, err := dlq.Replay(ctx, dc, cfg.DLQ, cfg.DLQReplay)
	if cfg.JSON {
		if jerr := writeJSON(stdout, rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		printReplay(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc dlq replay: stopped: %s\n", red.oneLine(err))
		return exitFailure
	}
	if rep.Failed > 0 {
		return exitFailure
	}
	return exitOK
}

// shown bounds the skipped and failed dead letters printed one by one.
const shown = 20

func printReplay(w io.Writer, rep *dlq.Report) {
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
	}{{"skipped", rep.Skipped, []string{dlq.Skipped}}, {"failed", rep.Failed, []string{dlq.Failed, dlq.HeldBack}}} {
		if what.n == 0 {
			continue
		}
		fmt.Fprintf(w, "%s %d:\n", what.name, what.n)
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

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func key(e dlq.Entry) string {
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

func size(e dlq.Entry) string {
	if strings.Contains(e.Truncated, "value") {
		return byteSize(int64(e.Size)) + ", value left out"
	}
	return byteSize(int64(e.Size))
}
