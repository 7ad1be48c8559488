package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
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

// Key is where a row stands in the backfill's order: the text forms of its
// timestamp column (empty without one) and its id.
type Key struct{ Time, ID string }

// Count counts tb's rows matching where.
func (s *Snapshot) Count(ctx context.Context, tb decode.Table, where string) (int64, error) {
	var n int64
	if err := s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE (%s)", quoted(tb), where)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows of %s where %s: %w", quoted(tb), where, err)
	}
	return n, nil
}

// Rows reads tb's rows matching where, after after (nil: from the first),
// ordered by the timestamp column (when tb has one) and then the id, and
// hands each to fn with the relation its values follow. fn's values are
// valid only during the call.
func (s *Snapshot) Rows(ctx context.Context, tb decode.Table, where string, after *Key,
	fn func(rel *pglogrepl.RelationMessage, values [][]byte, key Key) error) error {
	types, err := columnTypes(ctx, s.conn, tb)
	if err != nil {
		return err
	}
	id, ts := tb.Columns.ID, tb.Columns.Timestamp
	if _, ok := types[ts]; !ok {
		ts = ""
	}
	order := pgx.Identifier{id}.Sanitize()
	var args []any
	cond := "(" + where + ")"
	if ts != "" {
		order = pgx.Identifier{ts}.Sanitize() + ", " + order
	}
	if after != nil {
		if ts != "" {
			cond += fmt.Sprintf(" AND (%s, %s) > ($1::text::%s, $2::text::%s)", pgx.Identifier{ts}.Sanitize(), pgx.Identifier{id}.Sanitize(), types[ts], types[id])
			args = append(args, after.Time, after.ID)
		} else {
			cond += fmt.Sprintf(" AND %s > $1::text::%s", pgx.Identifier{id}.Sanitize(), types[id])
			args = append(args, after.ID)
		}
	}
	sql := fmt.Sprintf("SELECT * FROM %s WHERE %s ORDER BY %s", quoted(tb), cond, order)
	rows, err := s.conn.Query(ctx, sql, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
	if err != nil {
		return fmt.Errorf("read rows of %s: %w", quoted(tb), err)
	}
	defer rows.Close()
	rel := &pglogrepl.RelationMessage{Namespace: tb.Schema, RelationName: tb.Name}
	idAt, tsAt := -1, -1
	for i, f := range rows.FieldDescriptions() {
		rel.Columns = append(rel.Columns, &pglogrepl.RelationMessageColumn{Name: f.Name, DataType: f.DataTypeOID})
		switch f.Name {
		case id:
			idAt = i
		case ts:
			tsAt = i
		}
	}
	for rows.Next() {
		values := rows.RawValues()
		var k Key
		if idAt >= 0 {
			k.ID = string(values[idAt])
		}
		if tsAt >= 0 {
			k.Time = string(values[tsAt])
		}
		if err := fn(rel, values, k); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rows of %s: %w", quoted(tb), err)
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
		return nil, fmt.Errorf("%w: table %s does not exist", ErrNotReady, quoted(tb))
	}
	return types, nil
}

// CheckPredicate asks Postgres to plan a backfill's SELECT, in a read-only
// transaction: a predicate that does not parse, or names what tb lacks, is
// an error saying so.
func CheckPredicate(ctx context.Context, conn *pgx.Conn, tb decode.Table, where string) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, fmt.Sprintf("EXPLAIN SELECT * FROM %s WHERE (%s)", quoted(tb), where)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return fmt.Errorf("%w: --backfill-where %q on %s: %s", ErrNotReady, where, quoted(tb), strings.TrimSpace(pgErr.Message))
		}
		return err
	}
	return nil
}
