package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
)

// The kill -9 scenario of -compare: a relay killed with SIGKILL under load
// and started again; then how many events a read_committed consumer read
// more than once, or never. What a crash costs each delivery guarantee.

// killLoad for killPhase is the load the relay is killed under, at a random
// moment in the middle third or so.
var killLoad = load{1000, 1}

const (
	killPhase = 10 * time.Second
	// catchUpTimeout bounds the wait, after the load and the restart, for
	// every event to be read; what is still unread then is missing.
	catchUpTimeout = 3 * time.Minute
	// straggle is how long duplicates may still arrive after the last
	// event was read (a replay reaches partitions in its own order).
	straggle = 3 * time.Second
)

// killRun is one contender killed with SIGKILL under load and restarted.
type killRun struct {
	Relay       string
	Round       int
	Events      int     // events committed during the load
	KilledAfter float64 // seconds into the load
	// CatchUp is seconds from the kill until a read_committed consumer
	// had read every event (a JVM relay's start included).
	CatchUp float64
	// Of a read_committed consumer: events never read, events read more
	// than once, and its reads beyond the first.
	Missing, Duplicates, ExtraReads int
	// UncommittedDuplicates is events a read_uncommitted consumer read
	// more than once: with transactions, the aborted ones' records too.
	UncommittedDuplicates int
	// Reads and UncommittedReads are all records each consumer read.
	Reads, UncommittedReads int
	// TransactionalIDs are the broker's transactional ids that name the
	// table: proof that the relay wrote in transactions.
	TransactionalIDs []string
}

// killDups runs the kill -9 scenario for c once.
func (b *bench) killDups(ctx context.Context, c contender, round int) (killRun, error) {
	kr := killRun{Relay: c.name, Round: round}
	name := tableName("kill", c.name)
	if _, err := b.db.Exec(ctx, "CREATE TABLE "+name+" "+outboxDDL); err != nil {
		return kr, fmt.Errorf("create %s: %w", name, err)
	}
	var topics []string
	for _, t := range aggregateTypes[:b.aggregateTypes] {
		topics = append(topics, name+"."+t)
	}
	createTopics(ctx, b.brokers, topics...)
	pool, err := pgxpool.New(ctx, b.pgURL)
	if err != nil {
		return kr, err
	}
	defer pool.Close()
	committed, stopCommitted, err := b.countingConsumer(ctx, topics, kgo.ReadCommitted())
	if err != nil {
		return kr, err
	}
	defer stopCommitted()
	uncommitted, stopUncommitted, err := b.countingConsumer(ctx, topics, kgo.ReadUncommitted())
	if err != nil {
		return kr, err
	}
	defer stopUncommitted()

	cmd, err := c.start(ctx, name)
	if err != nil {
		return kr, fmt.Errorf("start: %w", err)
	}
	defer func() { b.cleanup(name, name) }() // after the relay stopped: its slot is active till then
	defer func() {
		if cmd != nil && !exited(cmd) {
			_ = stopGently(cmd)
		}
	}()
	if err := b.waitActive(ctx, name); err != nil {
		return kr, err
	}
	t := newTracker()
	began, killed, err := b.loadAndKill(ctx, c, name, pool, t, &cmd)
	if err != nil {
		return kr, err
	}
	kr.KilledAfter = killed.Sub(began).Seconds()
	kr.CatchUp = waitRead(ctx, committed, t, catchUpTimeout).Sub(killed).Seconds()
	time.Sleep(straggle)
	waitRead(ctx, uncommitted, t, 30*time.Second)
	kr.Events = len(t.committed)
	kr.Missing, kr.Duplicates, kr.ExtraReads = committed.tally(t)
	_, kr.UncommittedDuplicates, _ = uncommitted.tally(t)
	kr.Reads, kr.UncommittedReads = committed.reads(), uncommitted.reads()
	if kr.TransactionalIDs, err = b.transactionalIDs(ctx, name); err != nil {
		return kr, err
	}
	fmt.Fprintf(os.Stderr, "round %d %s kill -9 %.1f s into %s for %s: %d events; read_committed: %d records, %d events read twice (%d extra reads), %d missing; read_uncommitted: %d records, %d events read twice; caught up %.1f s after the kill; transactional ids %v\n",
		round, c.name, kr.KilledAfter, killLoad, killPhase, kr.Events, kr.Reads, kr.Duplicates, kr.ExtraReads, kr.Missing, kr.UncommittedReads, kr.UncommittedDuplicates, kr.CatchUp, kr.TransactionalIDs)
	return kr, nil
}

// loadAndKill writes killLoad for killPhase into table while, at a random
// moment between 30% and 70% of it, the relay *cmd is killed with SIGKILL
// and, once its slot is free, started again (*cmd is then the new one).
// It returns when both are done, with when the load began and the moment
// of the kill.
func (b *bench) loadAndKill(ctx context.Context, c contender, table string, pool *pgxpool.Pool, t *tracker, cmd **exec.Cmd) (began, killed time.Time, err error) {
	began = time.Now()
	at := time.Duration(float64(killPhase) * (0.3 + 0.4*rand.Float64()))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := b.write(gctx, pool, table, killLoad, killPhase, t)
		return err
	})
	g.Go(func() error {
		select {
		case <-gctx.Done():
			return gctx.Err()
		case <-time.After(time.Until(began.Add(at))):
		}
		_ = (*cmd).Process.Kill()
		_ = (*cmd).Wait() // "signal: killed"
		killed = time.Now()
		if err := b.waitInactive(gctx, table, 30*time.Second); err != nil {
			return err
		}
		next, err := c.start(gctx, table)
		if err != nil {
			return fmt.Errorf("restart after kill -9: %w", err)
		}
		*cmd = next
		return nil
	})
	err = g.Wait()
	return began, killed, err
}

// waitInactive waits until nothing streams slot (the walsender of a killed
// relay notices its peer is gone), for up to timeout; a relay started
// before would find the slot in use.
func (b *bench) waitInactive(ctx context.Context, slot string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var active bool
		err := b.db.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("slot %s: %w", slot, err)
		}
		if !active || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRead waits until r read every event t committed, or for timeout,
// and returns when it stopped waiting.
func waitRead(ctx context.Context, r *receipts, t *tracker, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if missing, _, _ := r.tally(t); missing == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}

// receipts counts how often a consumer read each event id.
type receipts struct {
	mu     sync.Mutex
	counts map[string]int
}

// tally returns how many of the events t committed r never read, how many
// events r read more than once, and its reads beyond each event's first.
func (r *receipts) tally(t *tracker) (missing, duplicates, extra int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range t.committed {
		if r.counts[id] == 0 {
			missing++
		}
	}
	for _, n := range r.counts {
		if n > 1 {
			duplicates++
			extra += n - 1
		}
	}
	return missing, duplicates, extra
}

// reads is how many records r read.
func (r *receipts) reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// countingConsumer reads topics from the start at isolation level iso
// with franz-go, counting each record by its id header.
func (b *bench) countingConsumer(ctx context.Context, topics []string, iso kgo.IsolationLevel) (*receipts, func(), error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(iso))
	if err != nil {
		return nil, nil, fmt.Errorf("consumer: %w", err)
	}
	r := &receipts{counts: map[string]int{}}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for cctx.Err() == nil {
			fetches := client.PollFetches(cctx)
			r.mu.Lock()
			fetches.EachRecord(func(rec *kgo.Record) {
				for _, h := range rec.Headers {
					if h.Key == "id" {
						r.counts[strings.Trim(string(h.Value), `"`)]++
						break
					}
				}
			})
			r.mu.Unlock()
		}
	})
	return r, func() { cancel(); wg.Wait(); client.Close() }, nil
}

// transactionalIDs lists the broker's transactional ids that hold table's
// name (outbox-cdc's outbox-cdc.DATABASE.SLOT, Kafka Connect's
// GROUP-CONNECTOR-TASK), with their state.
func (b *bench) transactionalIDs(ctx context.Context, table string) ([]string, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	resp, err := kmsg.NewPtrListTransactionsRequest().RequestWith(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	var ids []string
	for _, ts := range resp.TransactionStates {
		if strings.Contains(ts.TransactionalID, table) {
			ids = append(ids, ts.TransactionalID+" ("+ts.TransactionState+")")
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// tableName is a fresh name for a table (and its slot, publication and
// topic prefix) of contender's: letters, digits and underscores only.
func tableName(prefix, contender string) string {
	short := "outboxcdc"
	if !strings.HasPrefix(contender, "outbox-cdc") {
		short = strings.ReplaceAll(contender, "-", "_")
	}
	return fmt.Sprintf("%s_%s_%d", prefix, short, time.Now().UnixNano()%1e9)
}
