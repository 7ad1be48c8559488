package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
)

// bench is what every scenario shares: the servers and the relay binary.
type bench struct {
	pgURL   string
	brokers string
	relay   string // outbox-cdc binary, built without -race
	db      *pgx.Conn
	profile string // CPU profile of the relay in the largest drain, if set

	tmp         string // scratch directory, removed at exit
	brokerPID   int    // the Kafka broker's process, for its CPU
	metricsAddr string // outbox-cdc's /metrics in -compare
	// aggregateTypes is how many aggregate types (so topics) -compare's
	// writers spread their events over.
	aggregateTypes int
}

// drainResult is one run of the backlog scenario.
type drainResult struct {
	N            int
	PayloadBytes float64 // mean payload size
	DecodeRate   float64 // rows/s, bare pglogrepl reader
	DecodeMBps   float64 // pgoutput bytes/s of that reader, in MB/s
	// InServerRate is rows/s the server decodes the same backlog at in one
	// backend with no client at all (pg_logical_slot_peek_binary_changes):
	// the physical limit of any relay on this machine.
	InServerRate float64
	// InServerRatio is RelayRate / InServerRate.
	InServerRatio float64
	// DecodeInServerRatio is DecodeRate / InServerRate: how near any
	// client comes to the in-server decode over the replication protocol.
	DecodeInServerRatio float64
	// DecodeWalsender and RelayWalsender are the walsender's CPU, in cores
	// (CPU seconds per second), while it streamed the backlog to the bare
	// reader and to outbox-cdc: near 1, the walsender is the bottleneck.
	DecodeWalsender, RelayWalsender float64
	// RelayCores and BrokerCores are outbox-cdc's and the broker's CPU, in
	// cores, during its drain: with RelayWalsender, what the drain shares
	// the machine's cores with.
	RelayCores, BrokerCores float64
	ProduceRate             float64 // msgs/s, bare kafka-go writer
	RelayRate               float64 // events/s, outbox-cdc from start to the slot confirming the last commit
	Ratio                   float64 // RelayRate / min(DecodeRate, ProduceRate)
	PerEventUs              float64 // relay microseconds per event
	PeakRSSMiB              float64 // relay peak resident memory
	CPUPer100k              float64 // relay CPU seconds (user+system) per 100,000 events
}

const outboxDDL = `(
	id uuid primary key,
	aggregate_type text not null,
	aggregate_id text not null,
	event_type text not null,
	payload jsonb not null,
	headers jsonb)`

// payloadSQL builds a payload of about 300 bytes for row g.
const payloadSQL = `jsonb_build_object('order_id', md5(g::text), 'customer', 'customer-' || (g % 1000), 'amount', g % 10000,
	'currency', 'EUR', 'status', 'created', 'items', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (g % 97), 'qty', 1 + g % 5)),
	'note', repeat('n', 120))`

// drain runs the backlog scenario once: n rows in transactions of 100 are
// committed behind two fresh slots; one is read by a bare decoder, the
// other by outbox-cdc; a bare kafka-go writer produces as many messages of
// the same shape.
func (b *bench) drain(ctx context.Context, n int, profile bool) (drainResult, error) {
	res := drainResult{N: n}
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano()%1e9)
	for _, sql := range []string{
		"CREATE TABLE " + name + " " + outboxDDL,
		fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')", name, name),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s_dec', 'pgoutput')", name),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s_relay', 'pgoutput')", name),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s_srv', 'pgoutput')", name),
		fmt.Sprintf(`DO $$ BEGIN FOR t IN 0..%d LOOP
			INSERT INTO %s SELECT gen_random_uuid(), 'order', 'agg-' || (g %% 1000), 'created', %s
			FROM generate_series(t * 100, least(t * 100 + 99, %d - 1)) g;
			COMMIT; END LOOP; END $$`, (n-1)/100, name, payloadSQL, n),
	} {
		if _, err := b.db.Exec(ctx, sql); err != nil {
			return res, fmt.Errorf("%.60s: %w", sql, err)
		}
	}
	defer b.cleanup(name, name+"_dec", name+"_relay", name+"_srv")
	if err := b.db.QueryRow(ctx, "SELECT avg(octet_length(payload::text)) FROM "+name).Scan(&res.PayloadBytes); err != nil {
		return res, err
	}

	dec, err := b.decodeCeiling(ctx, name+"_dec", name, n)
	if err != nil {
		return res, fmt.Errorf("decode ceiling: %w", err)
	}
	res.DecodeRate, res.DecodeMBps = float64(dec.rows)/dec.took.Seconds(), float64(dec.bytes)/dec.took.Seconds()/1e6
	res.DecodeWalsender = dec.walsender / dec.walsenderFor.Seconds()

	if res.InServerRate, err = b.inServerDecode(ctx, name+"_srv", name, n); err != nil {
		return res, fmt.Errorf("in-server decode: %w", err)
	}

	if res.ProduceRate, err = b.produceCeiling(ctx, name+"_ceiling", n, int(res.PayloadBytes)); err != nil {
		return res, fmt.Errorf("produce ceiling: %w", err)
	}

	createTopics(ctx, b.brokers, name+".order")
	env := []string{}
	if profile && b.profile != "" {
		env = append(env, "OUTBOX_CDC_CPUPROFILE="+b.profile)
	}
	run, err := b.relayUntil(ctx, name, name+"_relay", dec.end, env)
	if err != nil {
		return res, fmt.Errorf("outbox-cdc drain: %w", err)
	}
	res.RelayRate = float64(n) / run.took.Seconds()
	res.Ratio = res.RelayRate / min(res.DecodeRate, res.ProduceRate)
	res.InServerRatio = res.RelayRate / res.InServerRate
	res.DecodeInServerRatio = res.DecodeRate / res.InServerRate
	if run.walsenderFor > 0 {
		res.RelayWalsender = run.walsender / run.walsenderFor.Seconds()
	}
	res.RelayCores, res.BrokerCores = cpuSeconds(run.usage)/run.took.Seconds(), run.broker/run.took.Seconds()
	res.PerEventUs = float64(run.took.Microseconds()) / float64(n)
	res.PeakRSSMiB = float64(run.usage.Maxrss) / 1024
	res.CPUPer100k = cpuSeconds(run.usage) / float64(n) * 100_000
	return res, nil
}

func cpuSeconds(u *syscall.Rusage) float64 {
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}

func (b *bench) cleanup(table string, slots ...string) {
	ctx := context.Background()
	for _, s := range slots {
		_, _ = b.db.Exec(ctx, "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", s)
	}
	_, _ = b.db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+table)
	_, _ = b.db.Exec(ctx, "DROP TABLE IF EXISTS "+table)
}

// produceCeiling produces n messages shaped like the relay's (same keys,
// value size, headers, acks, balancer and batching) with a bare kafka-go
// writer, and returns messages per second.
func (b *bench) produceCeiling(ctx context.Context, topic string, n, valueSize int) (float64, error) {
	createTopics(ctx, b.brokers, topic)
	var mu sync.Mutex
	acked, failed := 0, error(nil)
	done := make(chan struct{})
	w := &kafka.Writer{
		Addr: kafka.TCP(b.brokers), Topic: topic, Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
		BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, Async: true,
		Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && failed == nil {
				failed = err
			}
			if acked += len(msgs); acked == n {
				close(done)
			}
		},
	}
	defer w.Close()
	value := []byte(`{"note": "` + strings.Repeat("n", max(valueSize-13, 0)) + `"}`)
	began := time.Now()
	batch := make([]kafka.Message, 0, 100)
	for i := range n {
		batch = append(batch, kafka.Message{
			Key: fmt.Appendf(nil, "agg-%d", i%1000), Value: value,
			Headers: []kafka.Header{{Key: "id", Value: fmt.Appendf(nil, "%036d", i)}, {Key: "event_type", Value: []byte("created")}, {Key: "aggregate_type", Value: []byte("order")}},
		})
		if len(batch) == cap(batch) || i == n-1 {
			if err := w.WriteMessages(ctx, batch...); err != nil {
				return 0, err
			}
			batch = make([]kafka.Message, 0, 100)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("%d of %d acknowledged after 10 minutes", acked, n)
	}
	took := time.Since(began)
	if failed != nil {
		return 0, failed
	}
	return float64(n) / took.Seconds(), nil
}

// relayUntil runs outbox-cdc on slot with default settings until the slot
// confirms end, then stops it with SIGTERM, and returns the time from its
// start and its resource usage.
func (b *bench) relayUntil(ctx context.Context, table, slot string, end pglogrepl.LSN, env []string, extra ...string) (relayRun, error) {
	var run relayRun
	cmd := b.relayCmd(table, slot, env, extra...)
	began, brokerBefore := time.Now(), procCPU(b.brokerPID)
	if err := cmd.Start(); err != nil {
		return run, err
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Minute)
	walsender, seen := 0, time.Time{} // the slot's, once the relay streams, and when it was first seen
	for {
		var s string
		var pid *int
		err := b.db.QueryRow(ctx, "SELECT confirmed_flush_lsn::text, active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&s, &pid)
		if err != nil {
			return run, err
		}
		if walsender == 0 && pid != nil {
			walsender, seen = *pid, time.Now()
		}
		if lsn, _ := pglogrepl.ParseLSN(s); lsn >= end {
			break
		}
		if time.Now().After(deadline) {
			return run, fmt.Errorf("slot %s at %s, short of %s after 10 minutes", slot, s, end)
		}
		time.Sleep(5 * time.Millisecond)
	}
	run.took = time.Since(began)
	run.walsender = procCPU(walsender) // a new walsender: all its CPU is this relay's
	if walsender != 0 {
		run.walsenderFor = time.Since(seen)
	}
	run.broker = procCPU(b.brokerPID) - brokerBefore
	var err error
	run.usage, err = stop(cmd)
	return run, err
}

// relayRun is one outbox-cdc run until the slot confirmed a position.
type relayRun struct {
	took         time.Duration // from its start
	usage        *syscall.Rusage
	walsender    float64       // CPU seconds of the walsender streaming to it
	walsenderFor time.Duration // from when the walsender was first seen
	broker       float64       // CPU seconds of the broker meanwhile
}

// peakRSS reads the relay's resident high-water mark (VmHWM) while it
// runs. The rusage of a waited-for child is no use here: Linux carries the
// parent's high-water mark into ru_maxrss across fork and exec.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb / 1024
		}
	}
	return 0
}

// relayCmd is outbox-cdc on table's publication and slot, routing to
// table.{aggregate_type}; extra flags follow (and win).
func (b *bench) relayCmd(table, slot string, env []string, extra ...string) *exec.Cmd {
	cmd := exec.Command(b.relay, append([]string{
		"--postgres-url", b.pgURL, "--kafka-brokers", b.brokers, "--http-addr", "",
		"--table", "public." + table, "--publication", table, "--slot", slot,
		"--topic", table + ".{aggregate_type}", "--log-level", "warn"}, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if path := os.Getenv("OUTBOX_BENCH_RELAY_LOG"); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			cmd.Stdout, cmd.Stderr = f, f // closed with the process
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// stop ends the relay with SIGTERM and returns its resource usage, with
// Maxrss (KiB) replaced by the relay's own high-water mark.
func stop(cmd *exec.Cmd) (*syscall.Rusage, error) {
	hwm := peakRSS(cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("outbox-cdc: %w", err)
	}
	u := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	u.Maxrss = int64(hwm * 1024)
	return u, nil
}

func createTopics(ctx context.Context, brokers string, topics ...string) {
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: t, NumPartitions: 3, ReplicationFactor: 1})
	}
	_, _ = client.CreateTopics(ctx, req)
}
