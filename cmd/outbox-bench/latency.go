package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// latencyResult is one run of the steady-state scenario.
type latencyResult struct {
	Rate, TxRows  int
	Events        int     // events inserted (and received)
	AchievedRate  float64 // events/s the writers sustained
	P50, P99, Max float64 // commit → receipt, milliseconds
	PeakRSSMiB    float64
	CPUPer100k    float64
	// At the writers' stop: WAL the walsender had not sent, and WAL sent
	// but not confirmed by outbox-cdc, in bytes.
	UnsentBytes, UnconfirmedBytes int64
}

// latency runs outbox-cdc with default settings while writers commit rate
// events/s in transactions of txRows, for d, and a consumer records for each
// event the time from its commit (the message timestamp: the outbox table
// has no timestamp column, so the relay stamps the commit time) to its
// receipt. The first second is left out as warm-up.
func (b *bench) latency(ctx context.Context, rate, txRows int, d time.Duration) (latencyResult, error) {
	res := latencyResult{Rate: rate, TxRows: txRows}
	name := fmt.Sprintf("lat_%d", time.Now().UnixNano()%1e9)
	if _, err := b.db.Exec(ctx, "CREATE TABLE "+name+" "+outboxDDL); err != nil {
		return res, err
	}
	defer b.cleanup(name, name)
	topic := name + ".order"
	createTopics(ctx, b.brokers, topic)

	var env []string
	if path := os.Getenv("OUTBOX_BENCH_LATENCY_PROFILE"); path != "" {
		env = append(env, "OUTBOX_CDC_CPUPROFILE="+path)
	}
	cmd := b.relayCmd(name, name, env)
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer cmd.Process.Kill()
	if err := b.waitActive(ctx, name); err != nil {
		return res, err
	}

	// Consumer: franz-go, a client independent of the relay's, reading
	// every partition from the start.
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer client.Close()
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers sync.WaitGroup
	c := &latencyConsumer{warm: time.Now().Add(time.Second)}
	consumers.Go(func() { c.poll(cctx, client) })

	// Writers: four connections share the rate, each on its own schedule.
	pool, err := pgxpool.New(ctx, b.pgURL)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	events, elapsed, err := writeAtRate(ctx, pool, name, rate, txRows, d)
	if err != nil {
		return res, err
	}
	b.backlog(ctx, &res)
	res.Events = events
	res.AchievedRate = float64(res.Events) / elapsed.Seconds()

	// Everything committed must arrive.
	if err := c.await(res.Events, time.Minute); err != nil {
		return res, err
	}
	stopConsumers()
	consumers.Wait()
	usage, err := stop(cmd)
	if err != nil {
		return res, err
	}
	lat, slow := c.lat, c.slow
	if len(lat) == 0 {
		return res, errors.New("no event received after the warm-up")
	}
	if len(slow) > 0 && os.Getenv("OUTBOX_BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "  %d events over 100 ms, committed between %.1fs and %.1fs after the warm-up\n", len(slow), slices.Min(slow), slices.Max(slow))
	}
	slices.Sort(lat)
	res.P50, res.P99, res.Max = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
	res.PeakRSSMiB = float64(usage.Maxrss) / 1024
	res.CPUPer100k = cpuSeconds(usage) / float64(res.Events) * 100_000
	return res, nil
}

// latencyConsumer records each event's time from commit to receipt. Its
// own type, apart from latency's sequence of steps, because its fields are
// shared between the polling goroutine and the wait for every event.
type latencyConsumer struct {
	warm time.Time // events committed before are the warm-up, left out

	mu       sync.Mutex
	lat      []float64 // commit → receipt, milliseconds
	slow     []float64 // seconds after the warm-up at which events took over 100 ms
	received int
}

// poll reads records until ctx ends, timing each on its fetch's arrival.
func (c *latencyConsumer) poll(ctx context.Context, client *kgo.Client) {
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		now := time.Now()
		c.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			c.received++
			if r.Timestamp.After(c.warm) {
				ms := float64(now.Sub(r.Timestamp).Microseconds()) / 1000
				c.lat = append(c.lat, ms)
				if ms > 100 {
					c.slow = append(c.slow, r.Timestamp.Sub(c.warm).Seconds())
				}
			}
		})
		c.mu.Unlock()
	}
}

// await waits until n events were received, failing after within: a
// latency figure over events that never arrived would hide their loss.
func (c *latencyConsumer) await(n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		got := c.received
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d events received a minute after the writers stopped", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeAtRate commits rate events/s into table in transactions of txRows
// for d, over four connections each on its own schedule, and returns the
// events committed and how long that took: the rate the writers achieved
// may fall short of the one asked for, and the report says so.
func writeAtRate(ctx context.Context, pool *pgxpool.Pool, table string, rate, txRows int, d time.Duration) (events int, elapsed time.Duration, err error) {
	const writers = 4
	interval := time.Duration(float64(time.Second) * float64(txRows*writers) / float64(rate))
	sql := fmt.Sprintf(`INSERT INTO %s SELECT gen_random_uuid(), 'order', 'agg-' || (g %% 1000), 'created', %s
		FROM generate_series($1::int, $1::int + $2::int - 1) g`, table, payloadSQL)
	began := time.Now()
	wctx, stopWriters := context.WithTimeout(ctx, d)
	defer stopWriters()
	var inserted sync.Map
	g, gctx := errgroup.WithContext(wctx)
	for w := range writers {
		g.Go(func() error {
			n := 0
			for i := 0; ; i++ {
				next := began.Add(time.Duration(i) * interval)
				select {
				case <-gctx.Done():
					inserted.Store(w, n)
					return nil
				case <-time.After(time.Until(next)):
				}
				if _, err := pool.Exec(gctx, sql, w*100_000_000+n, txRows); err != nil {
					inserted.Store(w, n)
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
				n += txRows
			}
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	elapsed = time.Since(began)
	inserted.Range(func(_, v any) bool { events += v.(int); return true })
	return events, elapsed, nil
}

// backlog records where a backlog sits when the writers stop: WAL not yet
// sent by the walsender, or sent but not yet confirmed by outbox-cdc. Best
// effort: without a walsender the figures stay zero.
func (b *bench) backlog(ctx context.Context, res *latencyResult) {
	_ = b.db.QueryRow(ctx, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn), -1)::bigint,
		coalesce(pg_wal_lsn_diff(sent_lsn, flush_lsn), -1)::bigint FROM pg_stat_replication WHERE application_name = 'outbox-cdc' LIMIT 1`).Scan(&res.UnsentBytes, &res.UnconfirmedBytes)
}

func quantile(sorted []float64, q float64) float64 {
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// waitActive waits for outbox-cdc to stream slot (it creates it).
func (b *bench) waitActive(ctx context.Context, slot string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var active bool
		err := b.db.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err == nil && active {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %s not active a minute after outbox-cdc started", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
