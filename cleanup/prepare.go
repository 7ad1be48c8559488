package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
)

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
