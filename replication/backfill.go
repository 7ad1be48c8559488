package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// BackfillTable is the table, in the schema of the first outbox table,
// where backfills keep their progress: a row per slot and outbox table. A
// restart reads it to know whether a backfill is done, or where to resume.
const BackfillTable = "outbox_cdc_backfill"

// Backfill phases.
const (
	BackfillPending = "pending" // recorded before the slot is created
	BackfillRunning = "running"
	BackfillDone    = "done"
)

// BackfillState is one table's backfill for one slot.
type BackfillState struct {
	Table           string // schema.table
	Phase           string
	ConsistentPoint pglogrepl.LSN
	Total, Done     int64 // rows matching, rows acknowledged (in order)
	After           *Key  // the last row acknowledged with every one before it
	Updated         time.Time
}

// BackfillStore reads and writes the progress of slot's backfills.
type BackfillStore struct {
	conn *pgx.Conn
	name string // quoted schema.outbox_cdc_backfill
	slot string
}

// OpenBackfillStore connects and creates the progress table when missing.
func OpenBackfillStore(ctx context.Context, url, schema, slot string) (*BackfillStore, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	s := &BackfillStore{conn: conn, name: pgx.Identifier{schema, BackfillTable}.Sanitize(), slot: slot}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.name).Scan(&exists); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("look for %s: %w", s.name, err)
	}
	if !exists {
		_, err = conn.Exec(ctx, BackfillTableSQL(schema))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		conn.Close(context.Background())
		return nil, fmt.Errorf("%w: the role may not create %s, where --backfill-where keeps its progress; run outbox-cdc setup --backfill-where … --role … as the tables' owner", ErrNotReady, s.name)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("create %s: %w", s.name, err)
	}
	return s, nil
}

// BackfillTableSQL creates the progress table in schema.
func BackfillTableSQL(schema string) string {
	return `CREATE TABLE IF NOT EXISTS ` + pgx.Identifier{schema, BackfillTable}.Sanitize() + ` (
		slot text NOT NULL, outbox_table text NOT NULL, phase text NOT NULL, consistent_point pg_lsn,
		total bigint NOT NULL DEFAULT 0, done bigint NOT NULL DEFAULT 0, after_time text, after_id text,
		updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (slot, outbox_table))`
}

// Close closes the store's connection.
func (s *BackfillStore) Close() { s.conn.Close(context.Background()) }

// Load returns the slot's backfills by table.
func (s *BackfillStore) Load(ctx context.Context) (map[string]BackfillState, error) {
	return loadBackfills(ctx, s.conn, s.name, s.slot)
}

func loadBackfills(ctx context.Context, conn *pgx.Conn, name, slot string) (map[string]BackfillState, error) {
	rows, err := conn.Query(ctx, `SELECT outbox_table, phase, coalesce(consistent_point::text, ''), total, done, after_time, after_id, updated_at
		FROM `+name+` WHERE slot = $1`, slot)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	out := map[string]BackfillState{}
	var st BackfillState
	var lsn string
	var afterTime, afterID *string
	_, err = pgx.ForEachRow(rows, []any{&st.Table, &st.Phase, &lsn, &st.Total, &st.Done, &afterTime, &afterID, &st.Updated}, func() error {
		st.ConsistentPoint, st.After = 0, nil
		if lsn != "" {
			st.ConsistentPoint, _ = pglogrepl.ParseLSN(lsn)
		}
		if afterID != nil {
			st.After = &Key{ID: *afterID}
			if afterTime != nil {
				st.After.Time = *afterTime
			}
		}
		out[st.Table] = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

// Save records st.
func (s *BackfillStore) Save(ctx context.Context, st BackfillState) error {
	var lsn, afterTime, afterID *string
	if st.ConsistentPoint != 0 {
		v := st.ConsistentPoint.String()
		lsn = &v
	}
	if st.After != nil {
		afterTime, afterID = &st.After.Time, &st.After.ID
	}
	_, err := s.conn.Exec(ctx, `INSERT INTO `+s.name+` (slot, outbox_table, phase, consistent_point, total, done, after_time, after_id, updated_at)
		VALUES ($1, $2, $3, $4::text::pg_lsn, $5, $6, $7, $8, now())
		ON CONFLICT (slot, outbox_table) DO UPDATE SET phase = excluded.phase, consistent_point = excluded.consistent_point,
			total = excluded.total, done = excluded.done, after_time = excluded.after_time, after_id = excluded.after_id, updated_at = now()`,
		s.slot, st.Table, st.Phase, lsn, st.Total, st.Done, afterTime, afterID)
	if err != nil {
		return fmt.Errorf("record the backfill of %s: %w", st.Table, err)
	}
	return nil
}

// ReadBackfills returns slot's backfills, recorded in schema's progress
// table; none when there is no such table.
func ReadBackfills(ctx context.Context, conn *pgx.Conn, schema, slot string) (map[string]BackfillState, error) {
	name := pgx.Identifier{schema, BackfillTable}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	return loadBackfills(ctx, conn, name, slot)
}

// SlotExists reports whether slot exists.
func SlotExists(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read replication slots: %w", err)
	}
	return ok, nil
}

// PrepareTables is Prepare without the slot: the server, the tables and
// the publication.
func PrepareTables(ctx context.Context, conn *pgx.Conn, t Target) error {
	if err := checkServer(ctx, conn); err != nil {
		return err
	}
	for _, tb := range t.Tables {
		if err := checkTable(ctx, conn, tb); err != nil {
			return err
		}
	}
	return ensurePublication(ctx, conn, t)
}

// Lock waits until no other process backfills this slot, and keeps it so
// until Close.
func (s *BackfillStore) Lock(ctx context.Context) error {
	if _, err := s.conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('outbox-cdc backfill ' || $1))`, s.slot); err != nil {
		return fmt.Errorf("wait for another instance's backfill of slot %q: %w", s.slot, err)
	}
	return nil
}
