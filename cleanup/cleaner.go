package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// ErrNotReady is a table that cleanup cannot work on as configured.
var ErrNotReady = errors.New("outbox table not ready for --cleanup=delete-after-publish")

// batchSize is the most rows one DELETE names.
const batchSize = 1000

// Cleaner deletes published rows in batches and then acks their events.
// Track and Done may be called from any goroutine; Run owns the deleting.
type Cleaner struct {
	url       string
	tables    map[string]table // by schema.table
	ack       func(seq uint64)
	onDeleted func(n int64)
	log       *slog.Logger

	mu      sync.Mutex
	rows    map[uint64]row // tracked, not yet acknowledged by Kafka: bounded by the in-flight window
	ready   []settled      // acknowledged, waiting for their delete
	wake    chan struct{}
	deleted int64
}

type table struct {
	deleteSQL string // DELETE … WHERE id = ANY($1::type[])
}

type row struct{ table, id string }

type settled struct {
	seq uint64
	row row
	del bool // false: ack without deleting (a dead letter, or a row never tracked)
}

// Config is what a cleaner needs.
type Config struct {
	URL       string
	Tables    []decode.Table
	Ack       func(seq uint64) // acks an event to the checkpoint, once its row is deleted
	OnDeleted func(n int64)    // counts deleted rows, for metrics; nil: none
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
	c := &Cleaner{url: cfg.URL, tables: map[string]table{}, ack: cfg.Ack, onDeleted: cfg.OnDeleted, log: log,
		rows: map[uint64]row{}, wake: make(chan struct{}, 1)}
	for _, t := range cfg.Tables {
		sql, err := deleteSQL(ctx, conn, t)
		if err != nil {
			return nil, err
		}
		c.tables[t.Qualified()] = table{deleteSQL: sql}
	}
	return c, nil
}

func deleteSQL(ctx context.Context, conn *pgx.Conn, t decode.Table) (string, error) {
	name := pgx.Identifier{t.Schema, t.Name}.Sanitize()
	var typ string
	var unique, mayDelete bool
	err := conn.QueryRow(ctx, `
		SELECT format_type(a.atttypid, a.atttypmod),
			EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indnkeyatts = 1
				AND i.indkey[0] = a.attnum AND i.indpred IS NULL),
			has_table_privilege(a.attrelid, 'SELECT') AND has_table_privilege(a.attrelid, 'DELETE')
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped`,
		name, t.Columns.ID).Scan(&typ, &unique, &mayDelete)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("%w: %s has no column %q (--column-id)", ErrNotReady, name, t.Columns.ID)
	case err != nil:
		return "", fmt.Errorf("cleanup: read %s: %w", name, err)
	case !unique:
		return "", fmt.Errorf("%w: rows are deleted by %s.%s, which needs a unique index (make it the primary key)", ErrNotReady, name, t.Columns.ID)
	case !mayDelete:
		return "", fmt.Errorf("%w: the role may not delete from %s; GRANT SELECT, DELETE ON %s TO the role (outbox-cdc setup --cleanup=delete-after-publish --role … does)", ErrNotReady, name, name)
	}
	return fmt.Sprintf("DELETE FROM %s WHERE %s = ANY($1::%s[])", name, pgx.Identifier{t.Columns.ID}.Sanitize(), typ), nil
}

// Track records that the event under seq is the row id of table. Call it
// before the event is handed to Kafka.
func (c *Cleaner) Track(seq uint64, table, id string) {
	c.mu.Lock()
	c.rows[seq] = row{table: table, id: id}
	c.mu.Unlock()
}

// Done takes Kafka's acknowledgement of the event under seq; dead says it
// went to the dead-letter topic, and its row is kept.
func (c *Cleaner) Done(seq uint64, dead bool) {
	c.mu.Lock()
	r, tracked := c.rows[seq]
	delete(c.rows, seq)
	c.ready = append(c.ready, settled{seq: seq, row: r, del: tracked && !dead})
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
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
				case <-time.After(backoff(failing)):
				case <-ctx.Done():
					return
				}
				continue
			}
			if failing > 0 {
				c.log.Info("deleting published outbox rows succeeding again")
				failing = 0
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
	ids := map[string][]string{}
	for _, s := range batch {
		if s.del {
			ids[s.row.table] = append(ids[s.row.table], s.row.id)
		}
	}
	if len(ids) > 0 {
		deleted, err := c.delete(ctx, conn, ids)
		if err != nil {
			c.mu.Lock()
			c.ready = append(batch, c.ready...)
			c.mu.Unlock()
			return 0, err
		}
		c.mu.Lock()
		c.deleted += deleted
		c.mu.Unlock()
		if c.onDeleted != nil {
			c.onDeleted(deleted)
		}
	}
	for _, s := range batch {
		c.ack(s.seq)
	}
	return n, nil
}

func (c *Cleaner) delete(ctx context.Context, conn **pgx.Conn, ids map[string][]string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if *conn == nil || (*conn).IsClosed() {
		cn, err := pgx.Connect(ctx, c.url)
		if err != nil {
			return 0, err
		}
		*conn = cn
	}
	var total int64
	err := pgx.BeginFunc(ctx, *conn, func(tx pgx.Tx) error {
		for name, list := range ids {
			tag, err := tx.Exec(ctx, c.tables[name].deleteSQL, list)
			if err != nil {
				return fmt.Errorf("delete from %s: %w", name, err)
			}
			total += tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		(*conn).Close(context.Background())
		*conn = nil
		return 0, err
	}
	return total, nil
}

func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 6)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}
