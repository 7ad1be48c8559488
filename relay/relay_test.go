package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/outbox"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

func TestNewRefusesWhatCannotWork(t *testing.T) {
	good := relay.Default()
	good.PostgresURL, good.Kafka.Brokers = "postgres://u@127.0.0.1:1/db", []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		name, field string // field: the Config field the error names
		mutate      func(c *relay.Config)
	}{
		{"no postgres url", "PostgresURL", func(c *relay.Config) { c.PostgresURL = "" }},
		{"no brokers", "Kafka.Brokers", func(c *relay.Config) { c.Kafka.Brokers = nil }},
		{"nothing to relay", "Tables", func(c *relay.Config) { c.Tables, c.Messages.Prefix = nil, "" }},
		{"heartbeat prefix", "Messages.Prefix", func(c *relay.Config) { c.Messages.Prefix = "outbox-cdc.heartbeat" }},
		{"bad topic template", "Tables[0].Route.Topic", func(c *relay.Config) { c.Tables[0].Route.Topic = "a.{" }},
		{"bad dead-letter topic", "Topics.DeadLetterTopic", func(c *relay.Config) { c.Topics.DeadLetterTopic = "no spaces" }},
		{"confirm past status", "Stream.ConfirmInterval", func(c *relay.Config) { c.Stream.ConfirmInterval = time.Hour }},
		{"unknown compression", "Producer.Compression", func(c *relay.Config) { c.Producer.Compression = "brotli" }},
		{"unknown failover", "Slot.Failover", func(c *relay.Config) { c.Slot.Failover = "maybe" }},
		{"cleanup with no tables", "Cleanup", func(c *relay.Config) { c.Tables, c.Cleanup = nil, cleanup.DeleteAfterPublish }},
		{"a mark without a column", "Tables[0].Mark", func(c *relay.Config) { c.Cleanup, c.Tables[0].Mark = cleanup.Mark, []cleanup.Set{{}} }},
		{"bad backfill order", "Tables[0].Backfill.Order", func(c *relay.Config) { c.Tables[0].Backfill = backfill.Spec{Where: "true", Order: "random"} }},
	} {
		c := good
		c.Tables = append([]relay.Table(nil), good.Tables...)
		tt.mutate(&c)
		_, err := relay.New(c)
		var ce *relay.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%s: New returned %v, want a *relay.ConfigError naming %s", tt.name, err, tt.field)
		}
	}
	if _, err := relay.New(good); err != nil {
		t.Fatalf("the defaults with a URL and brokers: %v", err)
	}
	// One registry, two relays: the second cannot register its metrics, and
	// says so instead of panicking.
	reg := prometheus.NewRegistry()
	if _, err := relay.New(good, relay.WithRegisterer(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.New(good, relay.WithRegisterer(reg)); err == nil || !strings.Contains(err.Error(), "register metrics") {
		t.Errorf("a second relay on one registry: %v, want a registration error", err)
	}
	if _, err := relay.New(good, relay.WithRegisterer(prometheus.WrapRegistererWithPrefix("b_", reg))); err != nil {
		t.Errorf("a second relay on a prefixed registerer: %v", err)
	}
}

// syncBuffer is a log destination for a relay's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is a relay run by a test, stopped by its cleanup.
type running struct {
	r       *relay.Relay
	stop    context.CancelFunc
	stopped chan error
}

func start(t *testing.T, cfg relay.Config, opts ...relay.Option) *running {
	t.Helper()
	r, err := relay.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	run := &running{r: r, stop: stop, stopped: make(chan error, 1)}
	go func() { run.stopped <- r.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-run.stopped:
		case <-time.After(time.Minute):
			t.Error("relay did not return within a minute of its context's end")
		}
		testkit.DropSlot(t, pgURL, cfg.Slot.Name)
	})
	deadline := time.Now().Add(time.Minute)
	for r.Ready(ctx) != nil {
		select {
		case err := <-run.stopped:
			t.Fatalf("relay stopped before it was ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay not ready after a minute: %v", r.Ready(ctx))
		}
	}
	return run
}

// testConfig relays table name (and messages with its name as prefix) to
// topics name.{aggregate_type}.
func testConfig(name, brokers string) relay.Config {
	cfg := relay.Default()
	cfg.PostgresURL, cfg.Kafka.Brokers = pgURL, []string{brokers}
	cfg.Slot.Name, cfg.Slot.Publication, cfg.Messages.Prefix = name, name, name
	cfg.Defaults.Route.Topic = name + ".{aggregate_type}"
	cfg.Tables = []relay.Table{cfg.Table("public." + name)}
	cfg.Stream.StatusInterval = time.Second
	return cfg
}

// write commits n events, alternating rows and messages, one aggregate, and
// returns the WAL position after the commit.
func write(ctx context.Context, t *testing.T, name string, n int) pglogrepl.LSN {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	w := outbox.NewWriter(outbox.Config{Table: "public." + name, MessagePrefix: name})
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for i := range n {
			ev := outbox.Event{AggregateType: "order", AggregateID: "o-1", EventType: "e", Payload: map[string]int{"n": i}}
			var err error
			if i%2 == 0 {
				_, err = w.Write(ctx, tx, ev)
			} else {
				_, err = w.Emit(ctx, tx, ev)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, _ := pglogrepl.ParseLSN(s)
	return lsn
}

func waitConfirmed(ctx context.Context, t *testing.T, slot string, want pglogrepl.LSN) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for testkit.SlotConfirmed(t, pgURL, slot) < want {
		if time.Now().After(deadline) {
			t.Fatalf("slot %s confirmed %s after 30s, want %s", slot, testkit.SlotConfirmed(t, pgURL, slot), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEmbedded runs the relay in-process on real Postgres and Kafka: it
// logs to the logger given, registers its metrics with the registry given,
// is not ready before Run nor after it, and returns nil once its context
// ends, with everything acknowledged confirmed.
func TestEmbedded(t *testing.T) {
	needServers(t)
	ctx := context.Background()
	name := fmt.Sprintf("embedded_%d", time.Now().UnixNano()%1e9)
	if err := testkit.CreateTable(ctx, pgURL, name, testkit.DefaultColumns); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	opts := []relay.Option{relay.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), relay.WithRegisterer(reg), relay.WithVersion("v-test")}
	probe, err := relay.New(testConfig(name+"_probe", kafkaBrokers), opts[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Ready(ctx); err == nil || !strings.Contains(err.Error(), "not streaming") {
		t.Errorf("Ready before Run = %v, want not streaming", err)
	}

	run := start(t, testConfig(name, kafkaBrokers), opts...)
	end := write(ctx, t, name, 20)
	kr := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{kafkaBrokers}, Topic: name + ".order", MaxWait: 50 * time.Millisecond})
	defer kr.Close()
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := range 20 {
		m, err := kr.ReadMessage(readCtx)
		if err != nil {
			t.Fatalf("read event %d: %v", i, err)
		}
		if n := counter(t, m.Value); n != i {
			t.Errorf("event %d: %s, want n=%d (rows and messages in the order written)", i, m.Value, i)
		}
	}
	waitConfirmed(ctx, t, name, end)
	if n := testutil.ToFloat64(counterVec(t, reg, "outbox_cdc_events_published_total")); n != 20 {
		t.Errorf("outbox_cdc_events_published_total = %v in the registry given, want 20", n)
	}

	run.stop()
	select {
	case err := <-run.stopped:
		if err != nil {
			t.Errorf("Run returned %v after its context ended, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of its context's end")
	}
	run.stopped <- nil // for the cleanup
	if err := run.r.Ready(ctx); err == nil {
		t.Error("Ready after Run returned = nil, want an error")
	}
	if err := run.r.Run(ctx); err == nil {
		t.Error("a second Run = nil, want an error")
	}
	for _, want := range []string{`"msg":"starting"`, `"version":"v-test"`, `"msg":"kafka reachable"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the logger given has no %s:\n%s", want, logs.String())
		}
	}
}

// counterVec sums a counter family from reg, whatever its labels.
func counterVec(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	c.Add(sum)
	return c
}

// TestBrokerRefusesProduce: a broker (kfake) that answers every produce
// request with NOT_ENOUGH_REPLICAS keeps the slot where it was; once it
// accepts again, every event arrives and the slot moves past them.
func TestBrokerRefusesProduce(t *testing.T) {
	needServers(t)
	ctx := context.Background()
	name := fmt.Sprintf("refused_%d", time.Now().UnixNano()%1e9)
	if err := testkit.CreateTable(ctx, pgURL, name, testkit.DefaultColumns); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, name+".order"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var refusing atomic.Bool
	var refused atomic.Int64
	refusing.Store(true)
	cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1,
		When: func(kmsg.Request) bool {
			if refusing.Load() {
				refused.Add(1)
				return true
			}
			return false
		}})

	start(t, testConfig(name, cluster.ListenAddrs()[0]))
	before := testkit.SlotConfirmed(t, pgURL, name)
	end := write(ctx, t, name, 10)
	deadline := time.Now().Add(30 * time.Second)
	for refused.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if refused.Load() < 3 {
		t.Fatalf("%d produce requests refused in 30s: the test proves nothing", refused.Load())
	}
	time.Sleep(2 * time.Second) // status updates keep flowing meanwhile
	if got := testkit.SlotConfirmed(t, pgURL, name); got >= end {
		t.Fatalf("slot confirmed %s, past the unacknowledged events' commit (%s ends it)", got, end)
	}
	refusing.Store(false)
	waitConfirmed(ctx, t, name, end)
	kr := kafka.NewReader(kafka.ReaderConfig{Brokers: cluster.ListenAddrs(), Topic: name + ".order", Partition: partitionOf(t, cluster, name+".order"), MaxWait: 50 * time.Millisecond})
	defer kr.Close()
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range 10 {
		m, err := kr.ReadMessage(readCtx)
		if err != nil {
			t.Fatalf("read event %d: %v", i, err)
		}
		if n := counter(t, m.Value); n != i {
			t.Errorf("event %d: %s, want n=%d", i, m.Value, i)
		}
	}
	t.Logf("%d produce requests refused; slot held at %s until the broker accepted, then confirmed %s", refused.Load(), before, end)
}

// counter reads n from an event's payload, {"n": N}: jsonb (a row) and
// encoding/json (a message) space it differently.
func counter(t *testing.T, payload []byte) int {
	t.Helper()
	var p struct{ N int }
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatalf("payload %q: %v", payload, err)
	}
	return p.N
}

// partitionOf returns the partition of key o-1: the one that holds records.
func partitionOf(t *testing.T, cluster *kfake.Cluster, topic string) int {
	t.Helper()
	for p := range 3 {
		conn, err := kafka.DialLeader(context.Background(), "tcp", cluster.ListenAddrs()[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if end > 0 {
			return p
		}
	}
	t.Fatal("no partition holds records")
	return 0
}
