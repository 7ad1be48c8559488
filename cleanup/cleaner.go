package cleanup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
)

// batchSize is the most rows one DELETE names.
const batchSize = 1000

// Cleaner deletes or marks published rows in batches and then acks their
// events.
// Track and Done may be called from any goroutine; Run owns the deleting.
type Cleaner struct {
	url       string
	tables    map[string]table // by schema.table
	ack       func(seq uint64)
	onDeleted func(n int64)
	onMarked  func(n int64)
	log       *slog.Logger

	mu      sync.Mutex
	rows    map[uint64]row // tracked, not yet acknowledged by Kafka: bounded by the in-flight window
	ready   []settled      // acknowledged, waiting for their delete
	wake    chan struct{}
	deleted int64
	// Exactly-once (see Hold): acknowledged in a Kafka transaction not yet
	// committed; and how many released of them are not yet cleaned.
	held      []settled
	releasing int

	rconn *pgx.Conn // Release's; owned by the one Release at a time
}

type table struct {
	marks    bool      // clean marks (UPDATE) rather than deletes
	clean    statement // DELETE or UPDATE … WHERE id = ANY($1::type[])
	dead     statement // UPDATE of dead-lettered rows; empty: they are kept as they are
	deadOnly bool      // dead set, clean empty: published rows kept as they are
}

// statement is one batched DELETE or UPDATE: $1 is the ids, args the
// further parameters, reason the index in args of the dead letter's reason
// (-1: none).
type statement struct {
	sql    string
	args   []any
	reason int
}

// row is a tracked event's row: its table, its id, and the transaction
// that inserted it (0: unknown), for visible.
type row struct {
	table, id string
	xid       uint32
}

// What a settled event's row gets.
type action int

const (
	keep  action = iota // nothing: a dead letter without --mark-dead, or a row never tracked
	clean               // deleted, or marked with --mark
	bury                // marked with --mark-dead
)

type settled struct {
	seq    uint64
	row    row
	act    action
	reason string // the dead letter's, with bury
	acked  bool   // acked by the caller already (Hold): counted by Release, not acked
	// rechecked: its row was not found by a statement, its transaction
	// was then seen ended, and it is being cleaned once more (see unseen).
	rechecked bool
}

// Table is one outbox table and what happens to its rows once their events
// are in Kafka: deleted (no Mark), or updated by Mark; and dead-lettered
// rows updated by MarkDead (none: kept as they are).
type Table struct {
	decode.Table
	Mark, MarkDead []Set
}

// Track records that the event under seq is the row id of table. Call it
// before the event is handed to Kafka.
func (c *Cleaner) Track(seq uint64, table, id string, xid uint32) {
	c.mu.Lock()
	c.rows[seq] = row{table: table, id: id, xid: xid}
	c.mu.Unlock()
}

// Done takes Kafka's acknowledgement of the event under seq; a reason says
// it went to the dead-letter topic, and its row is kept, or marked dead.
func (c *Cleaner) Done(seq uint64, reason string) {
	c.mu.Lock()
	c.ready = append(c.ready, c.settle(seq, reason))
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// settle returns what becomes of seq's row, no longer tracked. Called with
// mu held.
func (c *Cleaner) settle(seq uint64, reason string) settled {
	r, tracked := c.rows[seq]
	delete(c.rows, seq)
	st := settled{seq: seq, row: r}
	tb := c.tables[r.table]
	switch {
	case !tracked:
	case reason == "" && tb.clean.sql != "":
		st.act = clean
	case reason != "" && tb.dead.sql != "":
		st.act, st.reason = bury, reason
	}
	return st
}

// Run deletes and acks until ctx ends. A failed delete is retried, with a
// new connection and backoff; its events stay unacked meanwhile, so the
// checkpoint holds and the in-flight window eventually pauses reading.
func (c *Cleaner) Run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	failing := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		for {
			n, err := c.flush(ctx, &conn)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if failing++; failing == 1 {
					c.log.Warn("deleting published outbox rows failed; retrying (their positions are not confirmed meanwhile)", slog.Any("err", err))
				}
				select {
				case <-time.After(backoff.Delay(failing, retryBase, retryCeiling)):
				case <-ctx.Done():
					return
				}
				continue
			}
			if failing > 0 {
				c.log.Info("deleting published outbox rows succeeding again")
				failing = 0
			}
			if n == 0 && c.pending() { // their rows' transactions not yet visible
				select {
				case <-time.After(waitBeforeRetry):
					continue
				case <-ctx.Done():
					return
				}
			}
			if n == 0 {
				break
			}
		}
	}
}

// Close deletes and acks what is ready, bounded by ctx: the drain of a
// clean stop. What it cannot delete stays unacked, and is replayed.
func (c *Cleaner) Close(ctx context.Context) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		n, err := c.flush(ctx, &conn)
		if err != nil {
			return fmt.Errorf("cleanup: delete published rows: %w", err)
		}
		if n == 0 && c.pending() { // their rows' transactions not yet visible
			select {
			case <-time.After(waitBeforeRetry):
				continue
			case <-ctx.Done():
				return nil // left unacked: read again
			}
		}
		if n == 0 {
			return nil
		}
	}
}

// Deleted returns how many rows this cleaner deleted.
func (c *Cleaner) Deleted() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleted
}

// flush deletes one batch of ready rows and acks its events; it returns how
// many events it settled. On failure the batch goes back to the front.
func (c *Cleaner) flush(ctx context.Context, conn **pgx.Conn) (int, error) {
	c.mu.Lock()
	n := min(len(c.ready), batchSize)
	batch := append([]settled(nil), c.ready[:n]...)
	c.ready = c.ready[n:]
	if len(c.ready) == 0 {
		c.ready = nil // let the backing array go
	}
	c.mu.Unlock()
	if n == 0 {
		return 0, nil
	}
	groups := map[group][]string{}
	for _, s := range batch {
		if s.act != keep {
			g := group{s.row.table, s.act, s.reason}
			groups[g] = append(groups[g], s.row.id)
		}
	}
	if len(groups) > 0 {
		deleted, marked, found, err := c.apply(ctx, conn, groups)
		if err == nil {
			batch, err = c.unseen(ctx, *conn, batch, found)
		}
		if err != nil {
			c.mu.Lock()
			c.ready = append(batch, c.ready...)
			c.mu.Unlock()
			return 0, err
		}
		c.mu.Lock()
		c.deleted += deleted
		c.mu.Unlock()
		if c.onDeleted != nil && deleted > 0 {
			c.onDeleted(deleted)
		}
		if c.onMarked != nil && marked > 0 {
			c.onMarked(marked)
		}
	}
	for _, s := range batch {
		if !s.acked {
			c.ack(s.seq)
		}
	}
	c.mu.Lock()
	c.released(batch)
	c.mu.Unlock()
	return len(batch), nil
}

// group is rows one statement settles.
type group struct {
	table  string
	act    action
	reason string
}

// apply runs each group's statement in one transaction, and returns how
// many rows it deleted and marked, and which (found: table and id).
func (c *Cleaner) apply(ctx context.Context, conn **pgx.Conn, groups map[group][]string) (deleted, marked int64, found map[row]bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if *conn == nil || (*conn).IsClosed() {
		cn, err := pgx.Connect(ctx, c.url)
		if err != nil {
			return 0, 0, nil, err
		}
		*conn = cn
	}
	found = map[row]bool{}
	err = pgx.BeginFunc(ctx, *conn, func(tx pgx.Tx) error {
		for g, ids := range groups {
			tb := c.tables[g.table]
			st := tb.clean
			if g.act == bury {
				st = tb.dead
			}
			args := append([]any{ids}, st.args...)
			if st.reason >= 0 {
				args[st.reason+1] = g.reason
			}
			rows, err := tx.Query(ctx, st.sql, args...)
			if err != nil {
				return fmt.Errorf("clean %s: %w", g.table, err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("clean %s: %w", g.table, err)
			}
			for _, id := range ids {
				found[row{table: g.table, id: id}] = true
			}
			if tb.marks {
				marked += int64(len(ids))
			} else {
				deleted += int64(len(ids))
			}
		}
		return nil
	})
	if err != nil {
		(*conn).Close(context.Background())
		*conn = nil
		return 0, 0, nil, err
	}
	return deleted, marked, found, nil
}

// A failed flush is tried again after a jittered wait that doubles from
// retryBase up to retryCeiling (see backoff.Delay).
const retryBase, retryCeiling = 100 * time.Millisecond, 5 * time.Second
