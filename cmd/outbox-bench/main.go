// Command outbox-bench measures outbox-cdc beside the ceilings of the
// servers it sits between, on throwaway local PostgreSQL and Kafka started
// by the project's scripts:
//
//   - decode ceiling: a bare pglogrepl reader of a committed backlog;
//   - produce ceiling: a bare kafka-go writer producing the same messages;
//   - backlog drain: outbox-cdc from start until the slot confirms the
//     backlog's last commit, at several backlog sizes, with its peak RSS and
//     CPU time;
//   - steady-state latency: commit → receipt at fixed insert rates.
//
// Each figure is the median of -runs runs, with min and max. It prints a
// table and writes results.json and chart.svg to -out.
//
// For digging: OUTBOX_BENCH_LATENCY_PROFILE=FILE writes a CPU profile of
// outbox-cdc in each latency run; OUTBOX_BENCH_DEBUG=1 says when the events
// over 100 ms were committed; OUTBOX_BENCH_RELAY_LOG=FILE keeps the relay's
// log.
//
//	go run ./cmd/outbox-bench            # or: make bench
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench:", err)
		os.Exit(1)
	}
}

// options are outbox-bench's flags, parsed and checked.
type options struct {
	runs                 int
	sizes, rates, txRows []int
	dur                  time.Duration
	out, profile         string
	compare              bool
	contenders, loads    string
	phase                time.Duration
	backlog              int
	relayArgs            string
	types                int
	ceiling, killDups    bool
	messages             bool
	writes, writers      int
	cleanup              bool
}

// parseOptions reads the command line, and fails on a malformed list
// before any server starts.
func parseOptions() (options, error) {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "runs of each scenario; figures are their median, min and max")
	sizes := flag.String("sizes", "10000,100000,1000000", "backlog sizes for the drain scenario, comma-separated")
	rates := flag.String("rates", "1000,5000", "insert rates (events/s) for the latency scenario")
	txRows := flag.String("tx-rows", "1,10", "rows per transaction for the latency scenario")
	flag.DurationVar(&o.dur, "duration", 30*time.Second, "length of each latency run")
	flag.StringVar(&o.out, "out", "bench-results", "directory for results.json and chart.svg")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of outbox-cdc during the largest drain's first run to this file")
	flag.BoolVar(&o.compare, "compare", false, "instead: outbox-cdc beside Debezium (and the bare reader's latency ceiling) on one Postgres and broker, -runs rounds, order rotated each round (two alternate)")
	flag.StringVar(&o.contenders, "contenders", "outbox-cdc,debezium", "with -compare: the relays compared: outbox-cdc (outbox-cdc+--flag=value+name:LABEL adds flags and names the variant), debezium (Kafka Connect standalone), debezium-eos (Kafka Connect distributed, exactly-once source support)")
	flag.StringVar(&o.loads, "loads", "1000x1,3000x1,5000x1,1000x10", "with -compare: steady loads, TXPERSECxROWS")
	flag.DurationVar(&o.phase, "phase", 20*time.Second, "with -compare: length of each steady load")
	flag.IntVar(&o.backlog, "backlog", 100000, "with -compare: backlog drained by each relay (0: none)")
	flag.StringVar(&o.relayArgs, "relay-args", "", "with -compare: extra outbox-cdc flags, space-separated (for tuning)")
	flag.IntVar(&o.types, "aggregate-types", 3, "with -compare: aggregate types the events are spread over, each routed to a topic of its own (3 partitions each)")
	flag.BoolVar(&o.ceiling, "ceiling", true, "with -compare: also measure the bare reader's latency ceiling at each load")
	flag.BoolVar(&o.killDups, "kill-dups", true, "with -compare: also kill each relay with SIGKILL under 1000 tx/s × 1 for 10 s, each round, restart it, and count the events a read_committed consumer read twice or never")
	flag.BoolVar(&o.messages, "messages", false, "instead: events as outbox rows against events as logical decoding messages, the writer's commits/s and WAL per event, and a backlog (-backlog) drained of each")
	flag.IntVar(&o.writes, "writes", 20000, "with -messages: events written in each writer run, one per transaction")
	flag.IntVar(&o.writers, "writers", 4, "with -messages: connections writing at once")
	flag.BoolVar(&o.cleanup, "cleanup", false, "instead: a backlog (-backlog) drained under --cleanup none, delete-after-publish and mark, for what cleaning costs per event")
	flag.Parse()
	var err error
	if o.sizes, err = ints(*sizes); err != nil {
		return o, fmt.Errorf("-sizes: %w", err)
	}
	if o.rates, err = ints(*rates); err != nil {
		return o, fmt.Errorf("-rates: %w", err)
	}
	if o.txRows, err = ints(*txRows); err != nil {
		return o, fmt.Errorf("-tx-rows: %w", err)
	}
	switch {
	case o.backlog < 0:
		return o, fmt.Errorf("-backlog %d: want 0 or more", o.backlog)
	case o.backlog == 0 && (o.messages || o.cleanup):
		return o, fmt.Errorf("-backlog %d: -messages and -cleanup drain a backlog", o.backlog)
	}
	return o, nil
}

func run() error {
	o, err := parseOptions()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := testkit.Root()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "outbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{relay: filepath.Join(tmp, "outbox-cdc"), tmp: tmp}
	if o.profile != "" {
		if b.profile, err = filepath.Abs(o.profile); err != nil {
			return err
		}
	}
	build := exec.Command("go", "build", "-o", b.relay, "./cmd/outbox-cdc")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build outbox-cdc: %w", err)
	}
	pg, err := testkit.StartPostgres()
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	defer pg.Stop()
	kafkaSrv, err := testkit.StartKafka()
	if err != nil {
		return fmt.Errorf("start kafka: %w", err)
	}
	defer kafkaSrv.Stop()
	b.pgURL, b.brokers, b.brokerPID = pg.URL, kafkaSrv.Brokers, kafkaSrv.PID
	if b.db, err = pgx.Connect(ctx, pg.URL); err != nil {
		return err
	}
	defer b.db.Close(context.Background())

	switch {
	case o.cleanup:
		return b.runCleanup(ctx, o.runs, o.backlog, o.out)
	case o.messages:
		return b.runMessages(ctx, root, o.runs, o.writes, o.writers, o.backlog, o.out)
	case o.compare:
		if o.types < 1 || o.types > len(aggregateTypes) {
			return fmt.Errorf("-aggregate-types %d: want 1 to %d", o.types, len(aggregateTypes))
		}
		b.aggregateTypes = o.types
		ls, err := parseLoads(o.loads)
		if err != nil {
			return fmt.Errorf("-loads: %w", err)
		}
		cfg := compareConfig{Rounds: o.runs, Loads: ls, Phase: o.phase, Backlog: o.backlog, Ceiling: o.ceiling, KillDups: o.killDups}
		return b.runCompare(ctx, root, strings.Split(o.contenders, ","), strings.Fields(o.relayArgs), cfg, o.out)
	}
	return b.runDefault(ctx, o)
}

// runDefault is the scenarios run without -compare, -messages or -cleanup:
// the drains, then the latencies, each -runs times, into one report.
func (b *bench) runDefault(ctx context.Context, o options) error {
	rep := report{Machine: machine(), Command: "go run ./cmd/outbox-bench " + strings.Join(os.Args[1:], " "), Runs: o.runs, Started: time.Now().UTC()}
	for _, n := range o.sizes {
		for i := range o.runs {
			r, err := b.drain(ctx, n, i == 0 && n == o.sizes[len(o.sizes)-1])
			if err != nil {
				return fmt.Errorf("drain of %d, run %d: %w", n, i+1, err)
			}
			fmt.Fprintf(os.Stderr, "drain n=%d run %d: in-server decode %.0f rows/s, decode %.0f rows/s, produce %.0f msgs/s, outbox-cdc %.0f events/s (%.2f of in-server decode, %.2f of the lower ceiling), RSS %.1f MiB\n",
				n, i+1, r.InServerRate, r.DecodeRate, r.ProduceRate, r.RelayRate, r.InServerRatio, r.Ratio, r.PeakRSSMiB)
			rep.Drains = append(rep.Drains, r)
		}
	}
	for _, rate := range o.rates {
		for _, tx := range o.txRows {
			for i := range o.runs {
				r, err := b.latency(ctx, rate, tx, o.dur)
				if err != nil {
					return fmt.Errorf("latency at %d/s, %d rows per transaction, run %d: %w", rate, tx, i+1, err)
				}
				fmt.Fprintf(os.Stderr, "latency %d/s x%d run %d: %d events at %.0f/s, p50 %.1f ms, p99 %.1f ms, max %.1f ms; at the writers' stop %d bytes unsent by the walsender, %d unconfirmed\n",
					rate, tx, i+1, r.Events, r.AchievedRate, r.P50, r.P99, r.Max, r.UnsentBytes, r.UnconfirmedBytes)
				rep.Latencies = append(rep.Latencies, r)
			}
		}
	}
	rep.summarize()
	rep.print(os.Stdout)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := rep.writeJSON(filepath.Join(o.out, "results.json")); err != nil {
		return err
	}
	if err := rep.writeSVG(filepath.Join(o.out, "chart.svg")); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(o.out, "results.json"), filepath.Join(o.out, "chart.svg"))
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
