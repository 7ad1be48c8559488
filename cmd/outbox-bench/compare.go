package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// phaseResult is one relay (or the bare reader) at one load, one round.
type phaseResult struct {
	Relay         string
	Round         int
	Load          load
	Events        int
	AchievedTx    float64 // transactions a second the writers sustained
	P50, P99, Max float64 // commit return → receipt, ms
	RelayUs       float64 // relay CPU µs per event
	BrokerUs      float64 // broker CPU µs per event
	WalsenderUs   float64 // walsender CPU µs per event
	Requests      float64 // produce requests per second (outbox-cdc only, from /metrics)
	RecordsPerReq float64
	// Batches is record batches a second as the consumer reads them: one
	// per partition per produce request, whichever relay wrote them.
	Batches float64
	// SentBytes is bytes written to Kafka per event (outbox-cdc only).
	SentBytes float64
	// Syscalls and Switches are the relay's read and write system calls
	// and its threads' context switches, per event (procWakes).
	Syscalls, Switches float64
}

// drainRun is one relay draining a backlog, one round.
type drainRun struct {
	Relay      string
	Round      int
	N          int
	Rate       float64 // events/s from the first receipt to the last
	CPUPer100k float64 // relay CPU seconds per 100k events over that span
	BrokerPer  float64 // broker CPU seconds per 100k events
	PeakRSSMiB float64
	SentBytes  float64 // bytes written to Kafka per event (outbox-cdc only)
}

// compareConfig is what -compare runs: Rounds of each contender at each
// of Loads for Phase, then a Backlog drained; optionally the bare reader's
// latency ceiling at each load, and the kill -9 scenario.
type compareConfig struct {
	Rounds            int
	Loads             []load
	Phase             time.Duration
	Backlog           int
	Ceiling, KillDups bool
}

// compare runs every contender on the same Postgres and broker, one at a
// time, cfg.Rounds times, their order rotated from round to round; and the
// bare reader's latency ceiling at the same loads. It fills rep's results.
func (b *bench) compare(ctx context.Context, contenders []contender, cfg compareConfig, rep *compareReport) error {
	if err := b.warmBroker(ctx); err != nil {
		return fmt.Errorf("warm the broker up: %w", err)
	}
	for round := range cfg.Rounds {
		// Rotated one place a round: two contenders alternate, and each of
		// more moves through the positions (the broker warms up, and
		// whoever goes first pays for it).
		k := round % len(contenders)
		order := append(slices.Clone(contenders[k:]), contenders[:k]...)
		for _, c := range order {
			ps, dr, err := b.compareOne(ctx, c, round+1, cfg.Loads, cfg.Phase, cfg.Backlog)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", c.name, round+1, err)
			}
			rep.Phases = append(rep.Phases, ps...)
			if dr.N > 0 {
				rep.Drains = append(rep.Drains, dr)
			}
			if !cfg.KillDups {
				continue
			}
			kr, err := b.killDups(ctx, c, round+1)
			if err != nil {
				return fmt.Errorf("%s, kill -9, round %d: %w", c.name, round+1, err)
			}
			rep.Kills = append(rep.Kills, kr)
		}
		for _, l := range cfg.Loads {
			if !cfg.Ceiling {
				break
			}
			r, err := b.ceilingLatency(ctx, l, cfg.Phase)
			if err != nil {
				return fmt.Errorf("bare reader at %s, round %d: %w", l, round+1, err)
			}
			r.Round = round + 1
			fmt.Fprintf(os.Stderr, "round %d bare reader %s: p50 %.1f ms, p99 %.1f ms, max %.1f ms, walsender %.0f µs/event\n",
				round+1, l, r.P50, r.P99, r.Max, r.WalsenderUs)
			rep.Phases = append(rep.Phases, r)
		}
	}
	return nil
}

// compareOne is one contender in one round: a warm-up, each load, then a
// backlog written while it is stopped and drained when it starts again.
func (b *bench) compareOne(ctx context.Context, c contender, round int, loads []load, d time.Duration, backlog int) ([]phaseResult, drainRun, error) {
	name := tableName("cmp", c.name)
	dr := drainRun{Relay: c.name, Round: round, N: backlog}
	if _, err := b.db.Exec(ctx, "CREATE TABLE "+name+" "+outboxDDL); err != nil {
		return nil, dr, err
	}
	defer b.cleanup(name, name)
	var topics []string
	for _, t := range aggregateTypes[:b.aggregateTypes] {
		topics = append(topics, name+"."+t)
	}
	createTopics(ctx, b.brokers, topics...)
	pool, err := pgxpool.New(ctx, b.pgURL)
	if err != nil {
		return nil, dr, err
	}
	defer pool.Close()

	var mu sync.Mutex
	cur := newTracker()
	current := func() *tracker { mu.Lock(); defer mu.Unlock(); return cur }
	use := func(t *tracker) { mu.Lock(); cur = t; mu.Unlock() }
	batches := &batchCounter{}
	stopConsumer, err := b.consumer(ctx, topics, current, batches)
	if err != nil {
		return nil, dr, err
	}
	defer stopConsumer()

	cmd, err := c.start(ctx, name)
	if err != nil {
		return nil, dr, fmt.Errorf("start: %w", err)
	}
	defer func() {
		if cmd != nil { // nil when a restart failed
			_ = cmd.Process.Kill()
		}
	}()
	if err := b.waitActive(ctx, name); err != nil {
		return nil, dr, err
	}
	// Warm-up, not measured: connections, JIT, the broker's first appends.
	if _, err := b.write(ctx, pool, name, load{1000, 1}, 5*time.Second, cur); err != nil {
		return nil, dr, err
	}
	if err := cur.waitAll(ctx, 2*time.Minute); err != nil {
		return nil, dr, fmt.Errorf("warm-up: %w", err)
	}
	var out []phaseResult
	for _, l := range loads {
		t := newTracker()
		use(t)
		pr, err := b.measurePhase(ctx, c.name, cmd.Process.Pid, pool, name, l, d, t, batches)
		if err != nil {
			return nil, dr, fmt.Errorf("%s: %w", l, err)
		}
		pr.Round = round
		fmt.Fprintf(os.Stderr, "round %d %s %s: %d events, p50 %.1f ms, p99 %.1f ms, max %.1f ms; CPU µs/event relay %.0f, broker %.0f, walsender %.0f; %.0f req/s of %.1f records, %.0f B/event sent; %.0f batches/s read; relay %.2f syscalls, %.2f context switches/event\n",
			round, c.name, l, pr.Events, pr.P50, pr.P99, pr.Max, pr.RelayUs, pr.BrokerUs, pr.WalsenderUs, pr.Requests, pr.RecordsPerReq, pr.SentBytes, pr.Batches, pr.Syscalls, pr.Switches)
		out = append(out, pr)
	}

	if err := stopGently(cmd); err != nil {
		return nil, dr, fmt.Errorf("stop before the backlog: %w", err)
	}
	if backlog == 0 { // -backlog 0: the loads only
		return out, dr, nil
	}
	t := newTracker()
	use(t)
	cmd, err = b.drainBacklog(ctx, c, pool, name, t, &dr)
	if err != nil {
		return nil, dr, err
	}
	if err := stopGently(cmd); err != nil {
		return nil, dr, fmt.Errorf("stop: %w", err)
	}
	return out, dr, nil
}

// measurePhase writes l into table for d while relay (process pid) runs,
// waits for every event to reach t, and measures latency and CPU.
func (b *bench) measurePhase(ctx context.Context, relay string, pid int, pool *pgxpool.Pool, table string, l load, d time.Duration, t *tracker, batches *batchCounter) (phaseResult, error) {
	wal := b.walsender(ctx, table)
	r0, b0, w0 := procCPU(pid), procCPU(b.brokerPID), procCPU(wal)
	s0, c0 := procWakes(pid)
	m0 := scrapeRequests(relay, b.metricsAddr)
	n0 := batches.n.Load()
	began := time.Now()
	achieved, err := b.write(ctx, pool, table, l, d, t)
	if err != nil {
		return phaseResult{}, err
	}
	if err := t.waitAll(ctx, 2*time.Minute); err != nil {
		return phaseResult{}, err
	}
	r1, b1, w1 := procCPU(pid), procCPU(b.brokerPID), procCPU(wal)
	s1, c1 := procWakes(pid)
	m1 := scrapeRequests(relay, b.metricsAddr)
	n1 := batches.n.Load()
	lat := t.latencies(began.Add(time.Second))
	if len(lat) == 0 {
		return phaseResult{}, errors.New("no event received")
	}
	n := float64(len(t.committed))
	pr := phaseResult{Relay: relay, Load: l, Events: len(t.committed), AchievedTx: achieved,
		P50: quantile(lat, 0.5), P99: quantile(lat, 0.99), Max: lat[len(lat)-1],
		RelayUs: (r1 - r0) / n * 1e6, BrokerUs: (b1 - b0) / n * 1e6, WalsenderUs: (w1 - w0) / n * 1e6,
		Batches: float64(n1-n0) / time.Since(began).Seconds(), Syscalls: (s1 - s0) / n, Switches: (c1 - c0) / n}
	if m1.requests > m0.requests {
		secs := time.Since(began).Seconds()
		pr.Requests = (m1.requests - m0.requests) / secs
		pr.RecordsPerReq = (m1.records - m0.records) / (m1.requests - m0.requests)
		pr.SentBytes = (m1.sent - m0.sent) / n
	}
	return pr, nil
}

// drainBacklog writes dr.N events into table while the relay is stopped,
// starts it again and times it from its first receipt to its last (so that
// a JVM's start is not counted), filling dr. It returns the relay, running.
func (b *bench) drainBacklog(ctx context.Context, c contender, pool *pgxpool.Pool, table string, t *tracker, dr *drainRun) (*exec.Cmd, error) {
	for i := 0; i < dr.N; i += 100 {
		ids := make([]string, min(100, dr.N-i))
		for j := range ids {
			ids[j] = uuid.NewString()
		}
		if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s SELECT id, %s, 'agg-' || (abs(hashtext(id::text)) %% 1000), 'created', %s
			FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, g)`, table, b.aggregateTypeSQL(), payloadSQL), ids); err != nil {
			return nil, err
		}
		t.commit(ids, time.Now())
	}
	cmd, err := c.start(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	var r0, b0 float64
	for {
		t.mu.Lock()
		started := !t.first.IsZero()
		t.mu.Unlock()
		if started {
			r0, b0 = procCPU(cmd.Process.Pid), procCPU(b.brokerPID)
			break
		}
		if exited(cmd) {
			return cmd, errors.New("relay exited before draining")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := t.waitAll(ctx, 10*time.Minute); err != nil {
		return cmd, fmt.Errorf("drain: %w", err)
	}
	r1, b1 := procCPU(cmd.Process.Pid), procCPU(b.brokerPID)
	dr.PeakRSSMiB = peakRSS(cmd.Process.Pid)
	dr.SentBytes = scrapeRequests(c.name, b.metricsAddr).sent / float64(dr.N)
	if span := t.last.Sub(t.first).Seconds(); span > 0 { // 0 when one fetch held a small backlog
		dr.Rate = float64(dr.N) / span
	}
	dr.CPUPer100k = (r1 - r0) / float64(dr.N) * 1e5
	dr.BrokerPer = (b1 - b0) / float64(dr.N) * 1e5
	fmt.Fprintf(os.Stderr, "round %d %s drain of %d: %.0f events/s, CPU %.2f s/100k (broker %.2f), peak RSS %.0f MiB, %.0f B/event sent\n",
		dr.Round, c.name, dr.N, dr.Rate, dr.CPUPer100k, dr.BrokerPer, dr.PeakRSSMiB, dr.SentBytes)
	return cmd, nil
}

// exited reports whether cmd's process ended, waited for or not (a zombie
// still answers signal 0).
func exited(cmd *exec.Cmd) bool {
	if cmd.ProcessState != nil || cmd.Process.Signal(syscallZero) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return true
	}
	_, state, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(state, "Z")
}
