package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// load is one steady phase: tx transactions a second of rows rows each.
type load struct{ TxPerSec, Rows int }

func (l load) String() string { return fmt.Sprintf("%d tx/s × %d", l.TxPerSec, l.Rows) }

func parseLoads(s string) ([]load, error) {
	var out []load
	for _, f := range strings.Split(s, ",") {
		tx, rows, ok := strings.Cut(strings.TrimSpace(f), "x")
		if !ok {
			rows = "1"
		}
		t, err1 := strconv.Atoi(tx)
		r, err2 := strconv.Atoi(rows)
		if err1 != nil || err2 != nil || t <= 0 || r <= 0 {
			return nil, fmt.Errorf("%q: want TXPERSECxROWS such as 1000x1", f)
		}
		out = append(out, load{t, r})
	}
	return out, nil
}

// aggregateTypes route events to topics of their own (TABLE.TYPE); the
// first -aggregate-types of them are used.
var aggregateTypes = []string{"order", "customer", "payment", "shipment", "invoice", "refund", "cart", "review"}

// aggregateTypeSQL picks each row's aggregate type from its id.
func (b *bench) aggregateTypeSQL() string {
	if b.aggregateTypes <= 1 {
		return "'order'"
	}
	return fmt.Sprintf("(ARRAY['%s'])[1 + abs(hashtext(id::text || 't')) %% %d]", strings.Join(aggregateTypes[:b.aggregateTypes], "','"), b.aggregateTypes)
}

// tracker matches each event id's commit return to its receipt.
type tracker struct {
	mu        sync.Mutex
	committed map[string]time.Time
	received  map[string]time.Time
	first     time.Time
	last      time.Time
}

func newTracker() *tracker {
	return &tracker{committed: map[string]time.Time{}, received: map[string]time.Time{}}
}

func (t *tracker) commit(ids []string, at time.Time) {
	t.mu.Lock()
	for _, id := range ids {
		t.committed[id] = at
	}
	t.mu.Unlock()
}

func (t *tracker) receive(id string, at time.Time) {
	t.mu.Lock()
	if _, dup := t.received[id]; !dup {
		t.received[id] = at
		if t.first.IsZero() {
			t.first = at
		}
		t.last = at
	}
	t.mu.Unlock()
}

// waitAll waits until every committed id was received.
func (t *tracker) waitAll(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		missing := 0
		for id := range t.committed {
			if _, ok := t.received[id]; !ok {
				missing++
			}
		}
		total := len(t.committed)
		t.mu.Unlock()
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d events not received %s after the writers stopped", missing, total, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// latencies returns commit → receipt in ms of the events committed after
// from, sorted.
func (t *tracker) latencies(from time.Time) []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []float64
	for id, c := range t.committed {
		if r, ok := t.received[id]; ok && c.After(from) {
			out = append(out, float64(r.Sub(c).Microseconds())/1000)
		}
	}
	slices.Sort(out)
	return out
}

// batchCounter counts the record batches a consumer reads.
type batchCounter struct{ n atomic.Int64 }

func (c *batchCounter) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	c.n.Add(1)
}

// consumer reads topic from the start with franz-go (a client independent
// of both relays) at read_committed, as consumers of exactly-once topics
// must (the same as read_uncommitted for records written outside
// transactions), and reports each record's id header to t, and each record
// batch to batches.
func (b *bench) consumer(ctx context.Context, topics []string, t func() *tracker, batches *batchCounter) (stop func(), err error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers), kgo.ConsumeTopics(topics...), kgo.WithHooks(batches),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for cctx.Err() == nil {
			fetches := client.PollFetches(cctx)
			now := time.Now()
			tr := t()
			fetches.EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if h.Key == "id" {
						tr.receive(strings.Trim(string(h.Value), `"`), now)
						break
					}
				}
			})
		}
	})
	return func() { cancel(); wg.Wait(); client.Close() }, nil
}

// write commits l's transactions for d from four connections, each on its
// own schedule, recording each event's commit return in t.
func (b *bench) write(ctx context.Context, pool *pgxpool.Pool, table string, l load, d time.Duration, t *tracker) (achieved float64, err error) {
	const writers = 4
	interval := time.Duration(float64(time.Second) * writers / float64(l.TxPerSec))
	sql := fmt.Sprintf(`INSERT INTO %s SELECT id, %s, 'agg-' || (abs(hashtext(id::text)) %% 1000), 'created', %s
		FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, g)`, table, b.aggregateTypeSQL(), payloadSQL)
	began := time.Now()
	wctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var txs sync.Map
	g, gctx := errgroup.WithContext(wctx)
	for w := range writers {
		g.Go(func() error {
			n := 0
			defer func() { txs.Store(w, n) }()
			for i := 0; ; i++ {
				next := began.Add(time.Duration(i)*interval + time.Duration(w)*interval/writers)
				select {
				case <-gctx.Done():
					return nil
				case <-time.After(time.Until(next)):
				}
				ids := make([]string, l.Rows)
				for j := range ids {
					ids[j] = uuid.NewString()
				}
				if _, err := pool.Exec(gctx, sql, ids); err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
				t.commit(ids, time.Now())
				n++
			}
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	total := 0
	txs.Range(func(_, v any) bool { total += v.(int); return true })
	return float64(total) / time.Since(began).Seconds(), nil
}

// walsender returns the PID of the walsender streaming slot, or 0.
func (b *bench) walsender(ctx context.Context, slot string) int {
	var pid *int32
	_ = b.db.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid)
	if pid == nil {
		return 0
	}
	return int(*pid)
}
