package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// compareReport is what -compare writes to compare.json.
type compareReport struct {
	Machine string
	Command string
	Started time.Time
	Rounds  int
	Phase   string
	Phases  []phaseResult
	Drains  []drainRun
}

// runCompare builds the contenders, runs the comparison and reports it.
func (b *bench) runCompare(ctx context.Context, root string, names, relayArgs []string, rounds int, loads []load, phase time.Duration, backlog int, out string) error {
	var cs []contender
	for _, n := range names {
		switch strings.TrimSpace(n) {
		case "outbox-cdc":
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			b.metricsAddr = l.Addr().String()
			l.Close()
			cs = append(cs, b.outboxCDC(append([]string{"--http-addr", b.metricsAddr}, relayArgs...)))
		case "debezium":
			libs, err := fetchDebezium(root)
			if err != nil {
				return err
			}
			cs = append(cs, b.debezium(libs))
		default:
			return fmt.Errorf("-contenders: %q is neither outbox-cdc nor debezium", n)
		}
	}
	phases, drains, err := b.compare(ctx, cs, rounds, loads, phase, backlog)
	if err != nil {
		return err
	}
	rep := compareReport{Machine: machine(), Command: "go run ./cmd/outbox-bench " + strings.Join(os.Args[1:], " "),
		Started: time.Now().UTC(), Rounds: rounds, Phase: phase.String(), Phases: phases, Drains: drains}
	printCompare(os.Stdout, rep, names, loads)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "compare.json"))
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// printCompare prints medians (min–max) over the rounds.
func printCompare(w io.Writer, rep compareReport, names []string, loads []load) {
	fmt.Fprintf(w, "\n%s; %d rounds, relays' order alternated; %s per load; medians (min–max)\n\n", rep.Machine, rep.Rounds, rep.Phase)
	fmt.Fprintln(w, "| load | relay | p50 ms | p99 ms | max ms | relay CPU µs/event | broker CPU µs/event | walsender CPU µs/event | produce req/s | records/req |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range loads {
		for _, n := range append(slices.Clone(names), "bare reader") {
			var runs []phaseResult
			for _, p := range rep.Phases {
				if p.Relay == strings.TrimSpace(n) && p.Load == l {
					runs = append(runs, p)
				}
			}
			if len(runs) == 0 {
				continue
			}
			get := func(f func(phaseResult) float64) string { return over(runs, f).String() }
			relayCPU, broker, reqs, per := get(func(p phaseResult) float64 { return p.RelayUs }), get(func(p phaseResult) float64 { return p.BrokerUs }),
				get(func(p phaseResult) float64 { return p.Requests }), get(func(p phaseResult) float64 { return p.RecordsPerReq })
			if n == "bare reader" {
				relayCPU, broker = "–", "–"
			}
			if runs[0].Requests == 0 {
				reqs, per = "–", "–"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", l, n,
				get(func(p phaseResult) float64 { return p.P50 }), get(func(p phaseResult) float64 { return p.P99 }),
				get(func(p phaseResult) float64 { return p.Max }), relayCPU, broker,
				get(func(p phaseResult) float64 { return p.WalsenderUs }), reqs, per)
		}
	}
	fmt.Fprintln(w, "\n| backlog | relay | drain events/s | relay CPU s/100k | broker CPU s/100k | peak RSS MiB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, n := range names {
		var runs []drainRun
		for _, d := range rep.Drains {
			if d.Relay == strings.TrimSpace(n) {
				runs = append(runs, d)
			}
		}
		if len(runs) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", runs[0].N, n,
			over(runs, func(d drainRun) float64 { return d.Rate }), over(runs, func(d drainRun) float64 { return d.CPUPer100k }),
			over(runs, func(d drainRun) float64 { return d.BrokerPer }), over(runs, func(d drainRun) float64 { return d.PeakRSSMiB }))
	}
}
