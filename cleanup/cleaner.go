package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
}

// Table is one outbox table and what happens to its rows once their events
// are in Kafka: deleted (no Mark), or updated by Mark; and dead-lettered
// rows updated by MarkDead (none: kept as they are).
type Table struct {
	decode.Table
	Mark, MarkDead []Set
}

// Config is what a cleaner needs.
type Config struct {
	URL       string
	Tables    []Table
	Ack       func(seq uint64) // acks an event to the checkpoint, once its row is deleted or marked
	OnDeleted func(n int64)    // counts deleted rows, for metrics; nil: none
	OnMarked  func(n int64)    // counts marked rows (either kind); nil: none
	Logger    *slog.Logger
}

// New checks that every table can be cleaned by the role of cfg.URL (a
// unique index on the id column, DELETE granted) and returns a cleaner.
func New(ctx context.Context, cfg Config) (*Cleaner, error) {
	conn, err := pgx.Connect(ctx, cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("cleanup: connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Cleaner{url: cfg.URL, tables: map[string]table{}, ack: cfg.Ack, onDeleted: cfg.OnDeleted, onMarked: cfg.OnMarked, log: log,
		rows: map[uint64]row{}, wake: make(chan struct{}, 1)}
	for _, t := range cfg.Tables {
		tb, err := prepareTable(ctx, conn, t)
		if err != nil {
			return nil, err
		}
		c.tables[t.Qualified()] = tb
	}
	return c, nil
}

// prepareTable checks what cleaning t needs (a unique id column, the
// privileges, columns that the marks fit) and builds its statements.
func prepareTable(ctx context.Context, conn *pgx.Conn, t Table) (table, error) {
	name := pgx.Identifier{t.Schema, t.Name}.Sanitize()
	priv := "DELETE"
	if len(t.Mark) > 0 || len(t.MarkDead) > 0 {
		priv = "UPDATE"
	}
	var typ string
	var unique, mayDelete bool
	err := conn.QueryRow(ctx, `
		SELECT format_type(a.atttypid, a.atttypmod),
			EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indnkeyatts = 1
				AND i.indkey[0] = a.attnum AND i.indpred IS NULL),
			has_table_privilege(a.attrelid, 'SELECT') AND has_table_privilege(a.attrelid, $3)
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped`,
		name, t.Columns.ID, priv).Scan(&typ, &unique, &mayDelete)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return table{}, fmt.Errorf("%w: %s has no column %q (--column-id)", ErrNotReady, name, t.Columns.ID)
	case err != nil:
		return table{}, fmt.Errorf("cleanup: read %s: %w", name, err)
	case !unique:
		return table{}, fmt.Errorf("%w: rows are cleaned by %s.%s, which needs a unique index (make it the primary key)", ErrNotReady, name, t.Columns.ID)
	case !mayDelete:
		return table{}, fmt.Errorf("%w: the role may not %s %s; GRANT SELECT, %s ON %s TO the role (outbox-cdc setup --cleanup=… --role … does)",
			ErrNotReady, strings.ToLower(priv), name, priv, name)
	}
	// RETURNING says which rows a statement found: see visible.
	where := fmt.Sprintf(" WHERE %s = ANY($1::%s[]) RETURNING %[1]s::text", pgx.Identifier{t.Columns.ID}.Sanitize(), typ)
	if len(t.Mark) == 0 && len(t.MarkDead) == 0 {
		return table{clean: statement{sql: "DELETE FROM " + name + where, reason: -1}}, nil
	}
	cats, err := columnCategories(ctx, conn, name)
	if err != nil {
		return table{}, err
	}
	tb := table{marks: true}
	if tb.clean, err = update(name, where, t.Mark, cats); err != nil && !errors.Is(err, errNoSets) {
		return table{}, err
	}
	if tb.dead, err = update(name, where, t.MarkDead, cats); err != nil && !errors.Is(err, errNoSets) {
		return table{}, err
	}
	tb.deadOnly = tb.clean.sql == ""
	return tb, nil
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
