package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// stat is a figure over runs.
type stat struct{ Median, Min, Max float64 }

func statOf(xs []float64) stat {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return stat{}
	}
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// over is the stat of one figure over runs.
func over[R any](runs []R, get func(R) float64) stat {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = get(r)
	}
	return statOf(xs)
}

func (s stat) String() string {
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
}

func num(x float64) string {
	switch {
	case x >= 1000:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

type drainSummary struct {
	N                                              int
	PayloadBytes                                   float64
	DecodeRate, DecodeMBps, ProduceRate, RelayRate stat
	Ratio, PerEventUs, PeakRSSMiB, CPUPer100k      stat
	InServerRate, InServerRatio                    stat
	DecodeInServerRatio                            stat
	DecodeWalsender, RelayWalsender                stat
	RelayDecodeRatio                               stat
	RelayCores, BrokerCores                        stat
}

type latencySummary struct {
	Rate, TxRows                int
	AchievedRate, P50, P99, Max stat
	PeakRSSMiB, CPUPer100k      stat
}

type report struct {
	Machine        string
	Command        string
	Runs           int
	Started        time.Time
	Drains         []drainResult
	Latencies      []latencyResult
	DrainSummary   []drainSummary
	LatencySummary []latencySummary
}

func (r *report) summarize() {
	byN := map[int][]drainResult{}
	var order []int
	for _, d := range r.Drains {
		if _, ok := byN[d.N]; !ok {
			order = append(order, d.N)
		}
		byN[d.N] = append(byN[d.N], d)
	}
	for _, n := range order {
		ds := byN[n]
		f := func(get func(drainResult) float64) stat { return over(ds, get) }
		r.DrainSummary = append(r.DrainSummary, drainSummary{
			N: n, PayloadBytes: ds[0].PayloadBytes,
			DecodeRate: f(func(d drainResult) float64 { return d.DecodeRate }), DecodeMBps: f(func(d drainResult) float64 { return d.DecodeMBps }),
			ProduceRate: f(func(d drainResult) float64 { return d.ProduceRate }), RelayRate: f(func(d drainResult) float64 { return d.RelayRate }),
			Ratio: f(func(d drainResult) float64 { return d.Ratio }), PerEventUs: f(func(d drainResult) float64 { return d.PerEventUs }),
			PeakRSSMiB: f(func(d drainResult) float64 { return d.PeakRSSMiB }), CPUPer100k: f(func(d drainResult) float64 { return d.CPUPer100k }),
			InServerRate:        f(func(d drainResult) float64 { return d.InServerRate }),
			InServerRatio:       f(func(d drainResult) float64 { return d.InServerRatio }),
			DecodeInServerRatio: f(func(d drainResult) float64 { return d.DecodeInServerRatio }),
			DecodeWalsender:     f(func(d drainResult) float64 { return d.DecodeWalsender }),
			RelayWalsender:      f(func(d drainResult) float64 { return d.RelayWalsender }),
			RelayDecodeRatio:    f(func(d drainResult) float64 { return d.RelayRate / d.DecodeRate }),
			RelayCores:          f(func(d drainResult) float64 { return d.RelayCores }),
			BrokerCores:         f(func(d drainResult) float64 { return d.BrokerCores }),
		})
	}
	type key struct{ rate, tx int }
	byKey := map[key][]latencyResult{}
	var keys []key
	for _, l := range r.Latencies {
		k := key{l.Rate, l.TxRows}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], l)
	}
	for _, k := range keys {
		ls := byKey[k]
		f := func(get func(latencyResult) float64) stat { return over(ls, get) }
		r.LatencySummary = append(r.LatencySummary, latencySummary{
			Rate: k.rate, TxRows: k.tx,
			AchievedRate: f(func(l latencyResult) float64 { return l.AchievedRate }),
			P50:          f(func(l latencyResult) float64 { return l.P50 }), P99: f(func(l latencyResult) float64 { return l.P99 }),
			Max: f(func(l latencyResult) float64 { return l.Max }), PeakRSSMiB: f(func(l latencyResult) float64 { return l.PeakRSSMiB }),
			CPUPer100k: f(func(l latencyResult) float64 { return l.CPUPer100k }),
		})
	}
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nmachine: %s\ncommand: %s\neach figure: median (min–max) of %d runs\n\n", r.Machine, r.Command, r.Runs)
	fmt.Fprintln(w, "Backlog drain (payload ~bytes; rates per second; outbox-cdc timed from process start to the slot confirming the last commit)")
	fmt.Fprintln(w, "| N | payload B | in-server decode rows/s | decode ceiling rows/s | decode MB/s | produce ceiling msgs/s | outbox-cdc events/s | ratio to in-server decode | ratio to min ceiling | µs/event | peak RSS MiB | CPU s /100k |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, d := range r.DrainSummary {
		fmt.Fprintf(w, "| %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", d.N, d.PayloadBytes, d.InServerRate,
			d.DecodeRate, d.DecodeMBps, d.ProduceRate, d.RelayRate, d.InServerRatio, d.Ratio, d.PerEventUs, d.PeakRSSMiB, d.CPUPer100k)
	}
	fmt.Fprintln(w, "\nWhere the drain's cores go (CPU seconds per second of each process; the walsender near 1 while the bare reader streams: it sends as fast as it can)")
	fmt.Fprintln(w, "| N | bare reader / in-server decode | walsender, bare reader | outbox-cdc / bare reader | walsender, outbox-cdc | outbox-cdc | broker |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, d := range r.DrainSummary {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", d.N, d.DecodeInServerRatio, d.DecodeWalsender, d.RelayDecodeRatio, d.RelayWalsender, d.RelayCores, d.BrokerCores)
	}
	fmt.Fprintln(w, "\nSteady-state latency, commit → receipt by a consumer (ms; Kafka timestamps have 1 ms resolution)")
	fmt.Fprintln(w, "| rate events/s | rows/tx | achieved/s | p50 ms | p99 ms | max ms | peak RSS MiB | CPU s /100k |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, l := range r.LatencySummary {
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s |\n", l.Rate, l.TxRows, l.AchievedRate, l.P50, l.P99, l.Max, l.PeakRSSMiB, l.CPUPer100k)
	}
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeSVG draws two bar charts: drain throughput beside the ceilings per
// N, and latency percentiles per scenario.
func (r *report) writeSVG(path string) error {
	const width, barH, gap = 900, 14, 6
	var b strings.Builder
	y := 30
	bars := func(title string, rows [][3]any, scale float64, unit string) {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", y, title)
		y += 10
		for _, row := range rows {
			label, value, color := row[0].(string), row[1].(float64), row[2].(string)
			w := 0.0
			if scale > 0 {
				w = value / scale * 560
			}
			fmt.Fprintf(&b, `<text x="10" y="%d" font-size="11">%s</text>`, y+barH-3, label)
			fmt.Fprintf(&b, `<rect x="250" y="%d" width="%.1f" height="%d" fill="%s"/>`, y, w, barH, color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%s %s</text>`+"\n", 255+w, y+barH-3, num(value), unit)
			y += barH + gap
		}
		y += 20
	}
	var drain [][3]any
	top := 0.0
	for _, d := range r.DrainSummary {
		top = max(top, d.DecodeRate.Median, d.ProduceRate.Median, d.RelayRate.Median)
	}
	for _, d := range r.DrainSummary {
		drain = append(drain,
			[3]any{fmt.Sprintf("N=%d decode ceiling", d.N), d.DecodeRate.Median, "#9ecae1"},
			[3]any{fmt.Sprintf("N=%d produce ceiling", d.N), d.ProduceRate.Median, "#a1d99b"},
			[3]any{fmt.Sprintf("N=%d outbox-cdc", d.N), d.RelayRate.Median, "#3182bd"})
	}
	bars("Backlog drain, events/s (median)", drain, top, "/s")
	var lat [][3]any
	top = 0
	for _, l := range r.LatencySummary {
		top = max(top, l.P99.Median, l.P50.Median)
	}
	for _, l := range r.LatencySummary {
		lat = append(lat,
			[3]any{fmt.Sprintf("%d/s, %d rows/tx p50", l.Rate, l.TxRows), l.P50.Median, "#fdae6b"},
			[3]any{fmt.Sprintf("%d/s, %d rows/tx p99", l.Rate, l.TxRows), l.P99.Median, "#e6550d"})
	}
	bars("Commit → receipt latency, ms (median of runs)", lat, top, "ms")
	svg := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">`+"\n%s</svg>\n", width, y, b.String())
	return os.WriteFile(path, []byte(svg), 0o644)
}

func machine() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf(", %.0f GiB memory", float64(kb)/(1<<20))
	}
	return fmt.Sprintf("%d CPUs%s, %s/%s, %s", runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
