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

func run() error {
	runs := flag.Int("runs", 3, "runs of each scenario; figures are their median, min and max")
	sizes := flag.String("sizes", "10000,100000,1000000", "backlog sizes for the drain scenario, comma-separated")
	rates := flag.String("rates", "1000,5000", "insert rates (events/s) for the latency scenario")
	txRows := flag.String("tx-rows", "1,10", "rows per transaction for the latency scenario")
	dur := flag.Duration("duration", 30*time.Second, "length of each latency run")
	out := flag.String("out", "bench-results", "directory for results.json and chart.svg")
	profile := flag.String("cpuprofile", "", "write a CPU profile of outbox-cdc during the largest drain's first run to this file")
	compare := flag.Bool("compare", false, "instead: outbox-cdc beside Debezium (and the bare reader's latency ceiling) on one Postgres and broker, -runs rounds, order rotated each round (two alternate)")
	contenders := flag.String("contenders", "outbox-cdc,debezium", "with -compare: the relays compared: outbox-cdc (outbox-cdc+--flag=value+name:LABEL adds flags and names the variant), debezium (Kafka Connect standalone), debezium-eos (Kafka Connect distributed, exactly-once source support)")
	loads := flag.String("loads", "1000x1,3000x1,5000x1,1000x10", "with -compare: steady loads, TXPERSECxROWS")
	phase := flag.Duration("phase", 20*time.Second, "with -compare: length of each steady load")
	backlog := flag.Int("backlog", 100000, "with -compare: backlog drained by each relay")
	relayArgs := flag.String("relay-args", "", "with -compare: extra outbox-cdc flags, space-separated (for tuning)")
	types := flag.Int("aggregate-types", 3, "with -compare: aggregate types the events are spread over, each routed to a topic of its own (3 partitions each)")
	ceiling := flag.Bool("ceiling", true, "with -compare: also measure the bare reader's latency ceiling at each load")
	killDups := flag.Bool("kill-dups", true, "with -compare: also kill each relay with SIGKILL under 1000 tx/s × 1 for 10 s, each round, restart it, and count the events a read_committed consumer read twice or never")
	messages := flag.Bool("messages", false, "instead: events as outbox rows against events as logical decoding messages, the writer's commits/s and WAL per event, and a backlog (-backlog) drained of each")
	writes := flag.Int("writes", 20000, "with -messages: events written in each writer run, one per transaction")
	writers := flag.Int("writers", 4, "with -messages: connections writing at once")
	cleanupBench := flag.Bool("cleanup", false, "instead: a backlog (-backlog) drained under --cleanup none, delete-after-publish and mark, for what cleaning costs per event")
	flag.Parse()
	ns, err := ints(*sizes)
	if err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	rs, err := ints(*rates)
	if err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	txs, err := ints(*txRows)
	if err != nil {
		return fmt.Errorf("-tx-rows: %w", err)
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
	if *profile != "" {
		if b.profile, err = filepath.Abs(*profile); err != nil {
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

	if *cleanupBench {
		return b.runCleanup(ctx, *runs, *backlog, *out)
	}
	if *messages {
		return b.runMessages(ctx, root, *runs, *writes, *writers, *backlog, *out)
	}
	if *compare {
		if *types < 1 || *types > len(aggregateTypes) {
			return fmt.Errorf("-aggregate-types %d: want 1 to %d", *types, len(aggregateTypes))
		}
		b.aggregateTypes = *types
		ls, err := parseLoads(*loads)
		if err != nil {
			return fmt.Errorf("-loads: %w", err)
		}
		cfg := compareConfig{Rounds: *runs, Loads: ls, Phase: *phase, Backlog: *backlog, Ceiling: *ceiling, KillDups: *killDups}
		return b.runCompare(ctx, root, strings.Split(*contenders, ","), strings.Fields(*relayArgs), cfg, *out)
	}

	rep := report{Machine: machine(), Command: "go run ./cmd/outbox-bench " + strings.Join(os.Args[1:], " "), Runs: *runs, Started: time.Now().UTC()}
	for _, n := range ns {
		for i := range *runs {
			r, err := b.drain(ctx, n, i == 0 && n == ns[len(ns)-1])
			if err != nil {
				return fmt.Errorf("drain of %d, run %d: %w", n, i+1, err)
			}
			fmt.Fprintf(os.Stderr, "drain n=%d run %d: decode %.0f rows/s, produce %.0f msgs/s, outbox-cdc %.0f events/s (%.2f), RSS %.1f MiB\n",
				n, i+1, r.DecodeRate, r.ProduceRate, r.RelayRate, r.Ratio, r.PeakRSSMiB)
			rep.Drains = append(rep.Drains, r)
		}
	}
	for _, rate := range rs {
		for _, tx := range txs {
			for i := range *runs {
				r, err := b.latency(ctx, rate, tx, *dur)
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
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := rep.writeJSON(filepath.Join(*out, "results.json")); err != nil {
		return err
	}
	if err := rep.writeSVG(filepath.Join(*out, "chart.svg")); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(*out, "results.json"), filepath.Join(*out, "chart.svg"))
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
