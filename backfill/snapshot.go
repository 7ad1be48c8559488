package backfill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Exported is a slot just created with its snapshot exported: the rows
// visible in the snapshot are exactly those committed before the slot's
// consistent point, from which the slot streams. The snapshot lives while
// the connection that created the slot is open; Close it once a reader has
// imported it (OpenSnapshot).
type Exported struct {
	Snapshot        string
	ConsistentPoint pglogrepl.LSN
	conn            *pgconn.PgConn
}

// CreateSlotExporting creates slot (plugin pgoutput) on a replication
// connection, exporting its snapshot, failover-enabled when asked
// (PostgreSQL 17+).
func CreateSlotExporting(ctx context.Context, url, slot string, failover bool) (*Exported, error) {
	pc, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("replication connection: %w", err)
	}
	action := "EXPORT_SNAPSHOT" // the form every version takes
	if failover {
		action = "(SNAPSHOT 'export', FAILOVER)"
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: action, Mode: pglogrepl.LogicalReplication})
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("create replication slot %q exporting its snapshot: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("slot %q: consistent point %q: %w", slot, res.ConsistentPoint, err)
	}
	return &Exported{Snapshot: res.SnapshotName, ConsistentPoint: lsn, conn: conn}, nil
}

// Close ends the exporting connection (the slot stays).
func (e *Exported) Close() { e.conn.Close(context.Background()) }

// Snapshot reads outbox rows in one read-only REPEATABLE READ transaction:
// in an exported snapshot, or a snapshot of its own.
type Snapshot struct {
	conn *pgx.Conn
}

// OpenSnapshot begins the reading transaction, importing exported (empty:
// a fresh snapshot). Values come in the text forms pgoutput sends.
func OpenSnapshot(ctx context.Context, url, exported string) (*Snapshot, error) {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pc.RuntimeParams["DateStyle"] = "ISO"
	pc.RuntimeParams["TimeZone"] = "UTC"
	pc.RuntimeParams["bytea_output"] = "hex"
	pc.RuntimeParams["extra_float_digits"] = "3"
	pc.RuntimeParams["application_name"] = "outbox-cdc backfill"
	pc.RuntimeParams["standard_conforming_strings"] = "on" // as CheckPredicate judged the predicate
	pc.RuntimeParams["search_path"] = searchPath           // as CheckPredicate planned it
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	s := &Snapshot{conn: conn}
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		s.Close()
		return nil, fmt.Errorf("begin the backfill's transaction: %w", err)
	}
	if exported != "" {
		if _, err := conn.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(exported)); err != nil {
			s.Close()
			return nil, fmt.Errorf("import snapshot %s: %w", exported, err)
		}
	}
	return s, nil
}

// Close ends the transaction (it changed nothing) and the connection.
func (s *Snapshot) Close() { s.conn.Close(context.Background()) }

// Key is where a row stands in a backfill's order: the text forms of its
// order's expressions (Order.exprs), nil for NULL.
type Key struct{ Values []*string }

// Current returns the snapshot the reading transaction sees, in
// pg_snapshot's text form: recorded with a backfill, so that a resume in
// a snapshot of its own reads exactly the rows this one saw.
func (s *Snapshot) Current(ctx context.Context) (string, error) {
	var snap string
	if err := s.conn.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snap); err != nil {
		return "", fmt.Errorf("read the backfill's snapshot: %w", err)
	}
	return snap, nil
}

// Read is what Count and Rows select: a table's rows matching a checked
// predicate, in Order, after After and up to Until (each nil: no bound).
type Read struct {
	Table decode.Table
	Where Predicate
	Order Order
	After *Key // resume after this row (nil: from the first)
	Until *Key // stop after this row (nil: to the end)
	// Loose compares After and Until on the order's values before its
	// statement (a row's cmin), both inclusive: a row's cmin is not its
	// own for good. An UPDATE or a row lock, even one rolled back (a
	// cleanup statement whose relay was killed, an application's retry
	// counter), writes its own command id there, so the row of After's
	// transaction that came after After when it was read may sort before
	// it now: compared on the whole key, a resume would skip it for good,
	// published and never marked, or never published at all. Loose re-reads
	// the rest of After's transaction (with --cleanup, only its rows not
	// yet cleaned): at least once, duplicates bounded by one transaction's
	// rows. An order without a statement (OrderID) is compared whole.
	Loose     bool
	types     map[string]string
	exprs     []orderExpr
	condition string
	args      []any
}

// prepare resolves r's column types and builds its condition and arguments.
func (r *Read) prepare(ctx context.Context, conn *pgx.Conn) error {
	if r.types != nil {
		return nil
	}
	types, err := columnTypes(ctx, conn, r.Table)
	if err != nil {
		return err
	}
	r.types = types
	if r.exprs, err = r.Order.exprs(r.Table, types); err != nil {
		return err
	}
	r.condition = "(" + r.Where.SQL() + ")" // rendered: no comment can swallow what follows
	cond, err := bounds(r.exprs, r.After, r.Until, r.Loose, &r.args)
	if err != nil {
		return fmt.Errorf("backfill of %s: %w (order %s)", quoted(r.Table), err, r.Order)
	}
	r.condition += cond
	return nil
}

// bounds is the condition " AND …" that a row comes after the key after and
// at or before until (each nil: no bound), in exprs' order; loose compares
// them as Read.Loose says.
func bounds(exprs []orderExpr, after, until *Key, loose bool, args *[]any) (string, error) {
	n := len(exprs) // how many of a key's values the bounds compare
	if i := slices.Index(exprs, statement); loose && i > 0 {
		n = i
	}
	cond := ""
	for _, b := range []struct {
		key     *Key
		form    string
		orEqual bool
	}{{after, "%s", n < len(exprs)}, {until, "NOT %s", false}} {
		if b.key == nil {
			continue
		}
		if len(b.key.Values) != len(exprs) {
			return "", fmt.Errorf("a recorded key has %d values, the order %d", len(b.key.Values), len(exprs))
		}
		cond += " AND " + fmt.Sprintf(b.form, afterKey(exprs[:n], b.key.Values[:n], args, b.orEqual))
	}
	return cond, nil
}

// Last returns the key of r's last row in its order (nil: none).
func (s *Snapshot) Last(ctx context.Context, r *Read) (*Key, error) {
	if err := r.prepare(ctx, s.conn); err != nil {
		return nil, err
	}
	keys, order := make([]string, len(r.exprs)), make([]string, len(r.exprs))
	for i, e := range r.exprs {
		keys[i] = fmt.Sprintf("(%s)::text", e.sql)
		order[i] = e.sql + " DESC NULLS LAST"
	}
	sql := fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT 1", strings.Join(keys, ", "), quoted(r.Table), r.condition, strings.Join(order, ", "))
	values := make([]*string, len(r.exprs))
	dst := make([]any, len(values))
	for i := range values {
		dst[i] = &values[i]
	}
	err := s.conn.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, r.args...)...).Scan(dst...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the last row of %s's backfill: %w", quoted(r.Table), brief(err))
	}
	return &Key{Values: values}, nil
}

// Count counts r's rows, under a statement timeout.
func (s *Snapshot) Count(ctx context.Context, r *Read) (int64, error) {
	if err := r.prepare(ctx, s.conn); err != nil {
		return 0, err
	}
	if _, err := s.conn.Exec(ctx, "SAVEPOINT before_count; SET LOCAL statement_timeout = '"+countTimeout+"'"); err != nil {
		return 0, fmt.Errorf("count rows of %s: %w", quoted(r.Table), err)
	}
	var n int64
	sql := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", quoted(r.Table), r.condition)
	err := s.conn.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, r.args...)...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rows of %s where %s: %w", quoted(r.Table), r.Where.String(), brief(err))
	}
	return n, s.NoTimeout(ctx)
}

// NoTimeout lifts the count's statement timeout: reading rows lasts as long
// as the backfill. After a count that timed out, it first rolls back to
// before the count (the transaction is aborted, its snapshot kept).
func (s *Snapshot) NoTimeout(ctx context.Context) error {
	if s.conn.PgConn().TxStatus() == 'E' {
		if _, err := s.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT before_count"); err != nil {
			return fmt.Errorf("recover from the count: %w", err)
		}
	}
	if _, err := s.conn.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return fmt.Errorf("lift the count's timeout: %w", err)
	}
	return nil
}

// countTimeout bounds the backfill's count of its rows.
const countTimeout = "10min"

// Rows reads r's rows in r's order and hands each to fn with the relation
// its values follow and its key. fn's values are valid only during the call.
func (s *Snapshot) Rows(ctx context.Context, r *Read, fn func(rel *pglogrepl.RelationMessage, values [][]byte, key Key) error) error {
	if err := r.prepare(ctx, s.conn); err != nil {
		return err
	}
	order := make([]string, len(r.exprs))
	keys := make([]string, len(r.exprs))
	for i, e := range r.exprs {
		order[i] = e.sql + " NULLS FIRST"
		keys[i] = fmt.Sprintf("(%s)::text AS outbox_cdc_key_%d", e.sql, i) // named apart from the table's columns, which ORDER BY names
	}
	sql := fmt.Sprintf("SELECT *, %s FROM %s WHERE %s ORDER BY %s",
		strings.Join(keys, ", "), quoted(r.Table), r.condition, strings.Join(order, ", "))
	rows, err := s.conn.Query(ctx, sql, append([]any{pgx.QueryExecModeExec, pgx.QueryResultFormats{pgx.TextFormatCode}}, r.args...)...)
	if err != nil {
		return fmt.Errorf("read rows of %s: %w", quoted(r.Table), brief(err))
	}
	defer rows.Close()
	var rel *pglogrepl.RelationMessage
	n := 0 // the table's own columns come first, then the order's
	for rows.Next() {
		if rel == nil { // described with the first row, on the extended protocol
			fields := rows.FieldDescriptions()
			n = len(fields) - len(r.exprs)
			rel = &pglogrepl.RelationMessage{Namespace: r.Table.Schema, RelationName: r.Table.Name}
			for _, f := range fields[:n] {
				rel.Columns = append(rel.Columns, &pglogrepl.RelationMessageColumn{Name: f.Name, DataType: f.DataTypeOID})
			}
		}
		values := rows.RawValues()
		k := Key{Values: make([]*string, len(r.exprs))}
		for i, v := range values[n:] {
			if v != nil {
				s := string(v)
				k.Values[i] = &s
			}
		}
		if err := fn(rel, values[:n], k); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rows of %s: %w", quoted(r.Table), brief(err))
	}
	return nil
}

// columnTypes maps tb's columns to their SQL types (format_type).
func columnTypes(ctx context.Context, conn *pgx.Conn, tb decode.Table) (map[string]string, error) {
	rows, err := conn.Query(ctx, `
		SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, quoted(tb))
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", quoted(tb), err)
	}
	types := map[string]string{}
	var n, t string
	if _, err := pgx.ForEachRow(rows, []any{&n, &t}, func() error { types[n] = t; return nil }); err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", quoted(tb), err)
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("%w: table %s does not exist", slot.ErrNotReady, quoted(tb))
	}
	return types, nil
}
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
