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
	Kills   []killRun `json:",omitempty"`
}

// runCompare builds the contenders, runs the comparison and reports it.
func (b *bench) runCompare(ctx context.Context, root string, names, relayArgs []string, cfg compareConfig, out string) error {
	var cs []contender
	for _, n := range names {
		// outbox-cdc+--flag=value+… is outbox-cdc with further flags, so
		// that two settings can be compared in one run.
		base, extra, _ := strings.Cut(strings.TrimSpace(n), "+")
		switch base {
		case "outbox-cdc":
			if b.metricsAddr == "" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				b.metricsAddr = l.Addr().String()
				l.Close()
			}
			args := append([]string{"--http-addr", b.metricsAddr}, relayArgs...)
			if extra != "" {
				args = append(args, strings.Split(extra, "+")...)
			}
			c := b.outboxCDC(args)
			c.name = strings.TrimSpace(n)
			for _, a := range args {
				if label, ok := strings.CutPrefix(a, "name:"); ok {
					c.name = "outbox-cdc " + label // name:LABEL names the variant in the report
				}
			}
			cs = append(cs, c)
		case "debezium", "debezium-eos":
			libs, err := fetchDebezium(root)
			if err != nil {
				return err
			}
			if base == "debezium" {
				cs = append(cs, b.debezium(libs))
			} else {
				cs = append(cs, b.debeziumEOS(libs))
			}
		default:
			return fmt.Errorf("-contenders: %q is none of outbox-cdc, debezium, debezium-eos", n)
		}
	}
	rep := compareReport{Machine: machine(), Command: "go run ./cmd/outbox-bench " + strings.Join(os.Args[1:], " "),
		Started: time.Now().UTC(), Rounds: cfg.Rounds, Phase: cfg.Phase.String()}
	if err := b.compare(ctx, cs, cfg, &rep); err != nil {
		return err
	}
	labels := make([]string, len(cs))
	for i, c := range cs {
		labels[i] = c.name
	}
	printCompare(os.Stdout, rep, labels, cfg.Loads)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeCompareSVG(filepath.Join(out, "compare.svg"), rep, labels, cfg.Loads); err != nil {
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
	fmt.Fprintf(w, "\n%s; %d rounds, relays' order rotated each round; %s per load; medians (min–max)\n\n", rep.Machine, rep.Rounds, rep.Phase)
	fmt.Fprintln(w, "| load | relay | achieved tx/s | p50 ms | p99 ms | max ms | relay CPU µs/event | broker CPU µs/event | walsender CPU µs/event | produce req/s | records/req | batches/s read | relay syscalls/event | relay context switches/event |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
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
			batches := get(func(p phaseResult) float64 { return p.Batches })
			if n == "bare reader" {
				batches = "–"
			}
			wakes, switches := get(func(p phaseResult) float64 { return p.Syscalls }), get(func(p phaseResult) float64 { return p.Switches })
			if n == "bare reader" || runs[0].Syscalls == 0 {
				wakes, switches = "–", "–"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", l, n,
				get(func(p phaseResult) float64 { return p.AchievedTx }), get(func(p phaseResult) float64 { return p.P50 }), get(func(p phaseResult) float64 { return p.P99 }),
				get(func(p phaseResult) float64 { return p.Max }), relayCPU, broker,
				get(func(p phaseResult) float64 { return p.WalsenderUs }), reqs, per, batches, wakes, switches)
		}
	}
	if len(rep.Drains) > 0 { // none with -backlog 0
		fmt.Fprintln(w, "\n| backlog | relay | drain events/s | relay CPU s/100k | broker CPU s/100k | peak RSS MiB |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
	}
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
	printCapacity(w, rep.Phases, names)
	printKills(w, rep.Kills, names)
}

// capacityP99 is the latency under which a rate counts as sustained.
const capacityP99 = 100.0 // ms

// capacity is the highest single-row rate of phases (one relay's, one
// round's) that the relay sustained, and every lower one too: p99 under
// capacityP99 with the writers reaching 95% of the rate asked. 0: none.
// Its resolution is -loads': include rates above what is expected.
func capacity(phases []phaseResult) float64 {
	var single []phaseResult
	for _, p := range phases {
		if p.Load.Rows == 1 {
			single = append(single, p)
		}
	}
	slices.SortFunc(single, func(a, b phaseResult) int { return a.Load.TxPerSec - b.Load.TxPerSec })
	best := 0.0
	for _, p := range single {
		if p.P99 >= capacityP99 || p.AchievedTx < 0.95*float64(p.Load.TxPerSec) {
			break
		}
		best = float64(p.Load.TxPerSec)
	}
	return best
}

// printCapacity prints each relay's capacity, median (min–max) over the
// rounds.
func printCapacity(w io.Writer, phases []phaseResult, names []string) {
	fmt.Fprintf(w, "\ncapacity: the highest single-row rate of -loads sustained with p99 under %.0f ms (and every lower one), the writers reaching 95%% of it\n\n", capacityP99)
	fmt.Fprintln(w, "| relay | capacity tx/s |")
	fmt.Fprintln(w, "|---|---|")
	for _, n := range names {
		byRound := map[int][]phaseResult{}
		for _, p := range phases {
			if p.Relay == strings.TrimSpace(n) {
				byRound[p.Round] = append(byRound[p.Round], p)
			}
		}
		var caps []float64
		for _, ps := range byRound {
			caps = append(caps, capacity(ps))
		}
		if len(caps) > 0 {
			fmt.Fprintf(w, "| %s | %s |\n", n, over(caps, func(c float64) float64 { return c }))
		}
	}
}

// printKills prints the kill -9 scenario, medians (min–max) over the
// rounds: what a read_committed consumer read twice or never, what a
// read_uncommitted one read twice (aborted transactions included), and how
// long the relay took from the kill to the last event.
func printKills(w io.Writer, kills []killRun, names []string) {
	if len(kills) == 0 {
		return
	}
	fmt.Fprintf(w, "\nkill -9 at a random moment of %s of %s, restarted at once; events read by a read_committed consumer (and a read_uncommitted one)\n\n", killPhase, killLoad)
	fmt.Fprintln(w, "| relay | events | read twice, read_committed | missing, read_committed | read twice, read_uncommitted | kill → last event read, s | transactional ids |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	count := func(s stat) string { return fmt.Sprintf("%.0f (%.0f–%.0f)", s.Median, s.Min, s.Max) }
	for _, n := range names {
		var runs []killRun
		for _, k := range kills {
			if k.Relay == strings.TrimSpace(n) {
				runs = append(runs, k)
			}
		}
		if len(runs) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d |\n", n,
			count(over(runs, func(k killRun) float64 { return float64(k.Events) })),
			count(over(runs, func(k killRun) float64 { return float64(k.Duplicates) })),
			count(over(runs, func(k killRun) float64 { return float64(k.Missing) })),
			count(over(runs, func(k killRun) float64 { return float64(k.UncommittedDuplicates) })),
			over(runs, func(k killRun) float64 { return k.CatchUp }), len(runs[0].TransactionalIDs))
	}
}

// writeCompareSVG draws, per load, each relay's p50 and p99 latency and its
// CPU per event (relay, broker, walsender), medians over the rounds.
func writeCompareSVG(path string, rep compareReport, names []string, loads []load) error {
	const barH, gap = 12, 4
	var b strings.Builder
	y := 30
	colors := map[string][2]string{"outbox-cdc": {"#9ecae1", "#3182bd"}, "outbox-cdc exactly-once": {"#bcbddc", "#756bb1"},
		"debezium": {"#fdae6b", "#e6550d"}, "debezium-eos": {"#fc9272", "#a50f15"}, "bare reader": {"#c7e9c0", "#31a354"}}
	color := func(n string, i int) string {
		if c, ok := colors[n]; ok {
			return c[i]
		}
		return [2]string{"#d9d9d9", "#636363"}[i]
	}
	type row struct {
		label string
		value float64
		color string
	}
	section := func(title, unit string, rows []row) {
		top := 0.0
		for _, r := range rows {
			top = max(top, r.value)
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", y, title)
		y += 10
		for _, r := range rows {
			w := 0.0
			if top > 0 {
				w = r.value / top * 520
			}
			fmt.Fprintf(&b, `<text x="10" y="%d" font-size="11">%s</text>`, y+barH-2, r.label)
			fmt.Fprintf(&b, `<rect x="300" y="%d" width="%.1f" height="%d" fill="%s"/>`, y, w, barH, r.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%s %s</text>`+"\n", 305+w, y+barH-2, num(r.value), unit)
			y += barH + gap
		}
		y += 18
	}
	med := func(n string, l load, f func(phaseResult) float64) (float64, bool) {
		var runs []phaseResult
		for _, p := range rep.Phases {
			if p.Relay == n && p.Load == l {
				runs = append(runs, p)
			}
		}
		return over(runs, f).Median, len(runs) > 0
	}
	var lat, cpu []row
	all := append(slices.Clone(names), "bare reader")
	for _, l := range loads {
		for _, n := range all {
			n = strings.TrimSpace(n)
			if v, ok := med(n, l, func(p phaseResult) float64 { return p.P50 }); ok {
				p99, _ := med(n, l, func(p phaseResult) float64 { return p.P99 })
				lat = append(lat, row{fmt.Sprintf("%s, %s p50", l, n), max(v, 0), color(n, 0)},
					row{fmt.Sprintf("%s, %s p99", l, n), p99, color(n, 1)})
			}
			if n == "bare reader" {
				continue
			}
			if r, ok := med(n, l, func(p phaseResult) float64 { return p.RelayUs }); ok {
				br, _ := med(n, l, func(p phaseResult) float64 { return p.BrokerUs })
				cpu = append(cpu, row{fmt.Sprintf("%s, %s relay", l, n), r, color(n, 1)},
					row{fmt.Sprintf("%s, %s broker", l, n), br, color(n, 0)})
			}
		}
	}
	section("Commit return → consumer receipt, ms (median of rounds)", "ms", lat)
	section("CPU per event, µs (median of rounds)", "µs", cpu)
	svg := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="900" height="%d" font-family="sans-serif">`+"\n%s</svg>\n", y, b.String())
	return os.WriteFile(path, []byte(svg), 0o644)
}
