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

// compare runs every contender on the same Postgres and broker, one at a
// time, rounds times, their order rotated from round to round; and the
// bare reader's latency ceiling at the same loads.
func (b *bench) compare(ctx context.Context, contenders []contender, rounds int, loads []load, d time.Duration, backlog int, ceiling bool) ([]phaseResult, []drainRun, error) {
	var phases []phaseResult
	var drains []drainRun
	if err := b.warmBroker(ctx); err != nil {
		return nil, nil, fmt.Errorf("warm the broker up: %w", err)
	}
	for round := range rounds {
		// Rotated one place a round: two contenders alternate, and each of
		// more moves through the positions (the broker warms up, and
		// whoever goes first pays for it).
		k := round % len(contenders)
		order := append(slices.Clone(contenders[k:]), contenders[:k]...)
		for _, c := range order {
			ps, dr, err := b.compareOne(ctx, c, round+1, loads, d, backlog)
			if err != nil {
				return nil, nil, fmt.Errorf("%s, round %d: %w", c.name, round+1, err)
			}
			phases = append(phases, ps...)
			drains = append(drains, dr)
		}
		for _, l := range loads {
			if !ceiling {
				break
			}
			r, err := b.ceilingLatency(ctx, l, d)
			if err != nil {
				return nil, nil, fmt.Errorf("bare reader at %s, round %d: %w", l, round+1, err)
			}
			r.Round = round + 1
			fmt.Fprintf(os.Stderr, "round %d bare reader %s: p50 %.1f ms, p99 %.1f ms, max %.1f ms, walsender %.0f µs/event\n",
				round+1, l, r.P50, r.P99, r.Max, r.WalsenderUs)
			phases = append(phases, r)
		}
	}
	return phases, drains, nil
}

// compareOne is one contender in one round: a warm-up, each load, then a
// backlog written while it is stopped and drained when it starts again.
func (b *bench) compareOne(ctx context.Context, c contender, round int, loads []load, d time.Duration, backlog int) ([]phaseResult, drainRun, error) {
	short := "outboxcdc"
	if !strings.HasPrefix(c.name, "outbox-cdc") {
		short = c.name
	}
	name := fmt.Sprintf("cmp_%s_%d", short, time.Now().UnixNano()%1e9)
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
	defer func() { _ = cmd.Process.Kill() }()
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
		wal := b.walsender(ctx, name)
		r0, b0, w0 := procCPU(cmd.Process.Pid), procCPU(b.brokerPID), procCPU(wal)
		m0 := scrapeRequests(c.name, b.metricsAddr)
		n0 := batches.n.Load()
		began := time.Now()
		achieved, err := b.write(ctx, pool, name, l, d, t)
		if err != nil {
			return nil, dr, err
		}
		if err := t.waitAll(ctx, 2*time.Minute); err != nil {
			return nil, dr, fmt.Errorf("%s: %w", l, err)
		}
		r1, b1, w1 := procCPU(cmd.Process.Pid), procCPU(b.brokerPID), procCPU(wal)
		m1 := scrapeRequests(c.name, b.metricsAddr)
		n1 := batches.n.Load()
		lat := t.latencies(began.Add(time.Second))
		if len(lat) == 0 {
			return nil, dr, fmt.Errorf("%s: no event received", l)
		}
		n := float64(len(t.committed))
		pr := phaseResult{Relay: c.name, Round: round, Load: l, Events: len(t.committed), AchievedTx: achieved,
			P50: quantile(lat, 0.5), P99: quantile(lat, 0.99), Max: lat[len(lat)-1],
			RelayUs: (r1 - r0) / n * 1e6, BrokerUs: (b1 - b0) / n * 1e6, WalsenderUs: (w1 - w0) / n * 1e6,
			Batches: float64(n1-n0) / time.Since(began).Seconds()}
		if m1.requests > m0.requests {
			secs := time.Since(began).Seconds()
			pr.Requests = (m1.requests - m0.requests) / secs
			pr.RecordsPerReq = (m1.records - m0.records) / (m1.requests - m0.requests)
			pr.SentBytes = (m1.sent - m0.sent) / n
		}
		fmt.Fprintf(os.Stderr, "round %d %s %s: %d events, p50 %.1f ms, p99 %.1f ms, max %.1f ms; CPU µs/event relay %.0f, broker %.0f, walsender %.0f; %.0f req/s of %.1f records, %.0f B/event sent; %.0f batches/s read\n",
			round, c.name, l, pr.Events, pr.P50, pr.P99, pr.Max, pr.RelayUs, pr.BrokerUs, pr.WalsenderUs, pr.Requests, pr.RecordsPerReq, pr.SentBytes, pr.Batches)
		out = append(out, pr)
	}

	// Backlog: written while the relay is stopped, drained when it starts
	// again; timed from its first receipt to its last.
	if err := stopGently(cmd); err != nil {
		return nil, dr, fmt.Errorf("stop before the backlog: %w", err)
	}
	t := newTracker()
	use(t)
	for i := 0; i < backlog; i += 100 {
		ids := make([]string, min(100, backlog-i))
		for j := range ids {
			ids[j] = uuid.NewString()
		}
		if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s SELECT id, %s, 'agg-' || (abs(hashtext(id::text)) %% 1000), 'created', %s
			FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, g)`, name, b.aggregateTypeSQL(), payloadSQL), ids); err != nil {
			return nil, dr, err
		}
		t.commit(ids, time.Now())
	}
	if cmd, err = c.start(ctx, name); err != nil {
		return nil, dr, fmt.Errorf("restart: %w", err)
	}
	// CPU from the first receipt, so that a JVM's start is not counted.
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
			return nil, dr, errors.New("relay exited before draining")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := t.waitAll(ctx, 10*time.Minute); err != nil {
		return nil, dr, fmt.Errorf("drain: %w", err)
	}
	r1, b1 := procCPU(cmd.Process.Pid), procCPU(b.brokerPID)
	dr.PeakRSSMiB = peakRSS(cmd.Process.Pid)
	dr.SentBytes = scrapeRequests(c.name, b.metricsAddr).sent / float64(backlog)
	span := t.last.Sub(t.first).Seconds()
	dr.Rate = float64(backlog) / span
	dr.CPUPer100k = (r1 - r0) / float64(backlog) * 1e5
	dr.BrokerPer = (b1 - b0) / float64(backlog) * 1e5
	fmt.Fprintf(os.Stderr, "round %d %s drain of %d: %.0f events/s, CPU %.2f s/100k (broker %.2f), peak RSS %.0f MiB, %.0f B/event sent\n",
		round, c.name, backlog, dr.Rate, dr.CPUPer100k, dr.BrokerPer, dr.PeakRSSMiB, dr.SentBytes)
	if err := stopGently(cmd); err != nil {
		return nil, dr, fmt.Errorf("stop: %w", err)
	}
	return out, dr, nil
}

func exited(cmd *exec.Cmd) bool {
	return cmd.ProcessState != nil || cmd.Process.Signal(syscallZero) != nil
}
