package backfill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// ProgressTable is the table, in the schema of the first outbox table,
// where backfills keep their progress: a row per slot and outbox table. A
// restart reads it to know whether a backfill is done, or where to resume.
const ProgressTable = "outbox_cdc_backfill"

// Backfill phases.
const (
	PhasePending = "pending" // recorded before the slot is created
	PhaseRunning = "running"
	PhaseDone    = "done"
	// PhaseForced is a --backfill-force run's, running: it publishes at
	// least once, and an instance about to stream does not wait for it.
	PhaseForced = "forced"
)

// State is one table's backfill for one slot.
type State struct {
	Table           string // schema.table
	Phase           string
	ConsistentPoint pglogrepl.LSN
	Total, Done     int64 // rows matching, rows acknowledged (in order)
	After           *Key  // the last row acknowledged with every one before it
	Updated         time.Time
	// Order is the order rows are read in; empty in a record of an
	// earlier version, which ordered by the timestamp column when the
	// table had one, else by id.
	Order Order
	// Snapshot is the exported snapshot the backfill began in
	// (pg_snapshot's text form), or a forced backfill's current snapshot
	// when it began: with ConsistentPoint it names the backfill. Empty in
	// a record of an earlier version.
	Snapshot string
	// Last is the last row of that snapshot in the backfill's order: a
	// resume, reading in a snapshot of its own, stops there, since rows
	// that sort after it committed after the slot, which streams them.
	// nil: not recorded (a resume then reads to the end).
	Last *Key
}

// Store reads and writes the progress of slot's backfills.
type Store struct {
	conn *pgx.Conn
	name string // quoted schema.outbox_cdc_backfill
	slot string
}

// OpenStore connects and creates the progress table when missing.
func OpenStore(ctx context.Context, url, schema, slotName string) (*Store, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	s := &Store{conn: conn, name: pgx.Identifier{schema, ProgressTable}.Sanitize(), slot: slotName}
	var exists, current bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, (SELECT count(*) = 4 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname IN ('order_by', 'snapshot', 'after_key', 'last_key') AND NOT attisdropped)`, s.name).Scan(&exists, &current); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("look for %s: %w", s.name, err)
	}
	switch {
	case !exists:
		_, err = conn.Exec(ctx, ProgressTableSQL(schema))
	case !current:
		_, err = conn.Exec(ctx, backfillColumnsSQL(s.name))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		conn.Close(context.Background())
		return nil, fmt.Errorf("%w: the role may not create or upgrade %s, where --backfill-where keeps its progress; run outbox-cdc setup --backfill-where … --role … as the tables' owner", slot.ErrNotReady, s.name)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("create %s: %w", s.name, err)
	}
	return s, nil
}

// SetupSQL creates the progress table in schema and grants role what the
// backfill does with it, for outbox-cdc setup.
func SetupSQL(schema, role string) []string {
	name := pgx.Identifier{schema, ProgressTable}.Sanitize()
	return []string{ProgressTableSQL(schema) + ";", backfillColumnsSQL(name) + ";",
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %s;", name, pgx.Identifier{role}.Sanitize())}
}

// HealSetupSQL creates the heal table in schema and grants role what
// --on-slot-lost heal does with it, for outbox-cdc setup.
func HealSetupSQL(schema, role string) []string {
	return []string{HealTableSQL(schema) + ";",
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %s;", pgx.Identifier{schema, HealTable}.Sanitize(), pgx.Identifier{role}.Sanitize())}
}

// BackfillTableSQL creates the progress table in schema.
func ProgressTableSQL(schema string) string {
	return `CREATE TABLE IF NOT EXISTS ` + pgx.Identifier{schema, ProgressTable}.Sanitize() + ` (
		slot text NOT NULL, outbox_table text NOT NULL, phase text NOT NULL, consistent_point pg_lsn,
		total bigint NOT NULL DEFAULT 0, done bigint NOT NULL DEFAULT 0, after_time text, after_id text,
		updated_at timestamptz NOT NULL DEFAULT now(), order_by text, snapshot text, after_key text[], last_key text[],
		PRIMARY KEY (slot, outbox_table))`
}

// backfillColumnsSQL adds to a progress table made by an earlier version
// the columns this one records (the order, the snapshot, the resume key).
func backfillColumnsSQL(name string) string {
	return `ALTER TABLE ` + name + ` ADD COLUMN IF NOT EXISTS order_by text, ADD COLUMN IF NOT EXISTS snapshot text,
		ADD COLUMN IF NOT EXISTS after_key text[], ADD COLUMN IF NOT EXISTS last_key text[]`
}

// Close closes the store's connection.
func (s *Store) Close() { s.conn.Close(context.Background()) }

// Load returns the slot's backfills by table.
func (s *Store) Load(ctx context.Context) (map[string]State, error) {
	return loadBackfills(ctx, s.conn, s.name, s.slot)
}

func loadBackfills(ctx context.Context, conn *pgx.Conn, name, slot string) (map[string]State, error) {
	rows, err := conn.Query(ctx, `SELECT outbox_table, phase, coalesce(consistent_point::text, ''), total, done, after_time, after_id, updated_at,
		to_jsonb(b) ->> 'order_by', to_jsonb(b) ->> 'snapshot', to_jsonb(b) -> 'after_key', to_jsonb(b) -> 'last_key'
		FROM `+name+` b WHERE slot = $1`, slot)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	out := map[string]State{}
	var st State
	var lsn string
	var afterTime, afterID, order, snapshot *string
	var afterKey, lastKey []*string
	_, err = pgx.ForEachRow(rows, []any{&st.Table, &st.Phase, &lsn, &st.Total, &st.Done, &afterTime, &afterID, &st.Updated,
		&order, &snapshot, &afterKey, &lastKey}, func() error {
		st.ConsistentPoint, st.After, st.Order, st.Snapshot, st.Last = 0, nil, "", "", nil
		if lastKey != nil {
			st.Last = &Key{Values: lastKey}
		}
		if lsn != "" {
			st.ConsistentPoint, _ = pglogrepl.ParseLSN(lsn)
		}
		if order != nil {
			st.Order = Order(*order)
		}
		if snapshot != nil {
			st.Snapshot = *snapshot
		}
		switch {
		case afterKey != nil:
			st.After = &Key{Values: afterKey}
		case afterID != nil: // an earlier version's record: timestamp ('' for NULL) and id
			st.After = &Key{Values: []*string{afterTime, afterID}}
			if afterTime != nil && *afterTime == "" {
				st.After.Values[0] = nil
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
func (s *Store) Save(ctx context.Context, st State) error {
	var lsn, order, snapshot *string
	var afterKey, lastKey []*string
	if st.Last != nil {
		lastKey = st.Last.Values
	}
	if st.ConsistentPoint != 0 {
		v := st.ConsistentPoint.String()
		lsn = &v
	}
	if st.Order != "" {
		order = (*string)(&st.Order)
	}
	if st.Snapshot != "" {
		snapshot = &st.Snapshot
	}
	if st.After != nil {
		afterKey = st.After.Values
	}
	_, err := s.conn.Exec(ctx, `INSERT INTO `+s.name+` (slot, outbox_table, phase, consistent_point, total, done, after_time, after_id,
			order_by, snapshot, after_key, last_key, updated_at)
		VALUES ($1, $2, $3, $4::text::pg_lsn, $5, $6, NULL, NULL, $7, $8, $9, $10, now())
		ON CONFLICT (slot, outbox_table) DO UPDATE SET phase = excluded.phase, consistent_point = excluded.consistent_point,
			total = excluded.total, done = excluded.done, after_time = NULL, after_id = NULL, order_by = excluded.order_by,
			snapshot = excluded.snapshot, after_key = excluded.after_key, last_key = excluded.last_key, updated_at = now()`,
		s.slot, st.Table, st.Phase, lsn, st.Total, st.Done, order, snapshot, afterKey, lastKey)
	if err != nil {
		return fmt.Errorf("record the backfill of %s: %w", st.Table, err)
	}
	return nil
}

// ReadBackfills returns slot's backfills, recorded in schema's progress
// table; none when there is no such table, or the role may not read it
// (then it runs no backfill: a backfilling role is granted SELECT on it).
func ReadStates(ctx context.Context, conn *pgx.Conn, schema, slot string) (map[string]State, error) {
	name := pgx.Identifier{schema, ProgressTable}.Sanitize()
	var readable bool
	if err := conn.QueryRow(ctx, `SELECT CASE WHEN to_regclass($1) IS NULL THEN false
		ELSE has_table_privilege(to_regclass($1), 'SELECT') END`, name).Scan(&readable); err != nil || !readable {
		return nil, err
	}
	return loadBackfills(ctx, conn, name, slot)
}

// Lock waits until no other process backfills this slot, and keeps it so
// until Close.
func (s *Store) Lock(ctx context.Context) error {
	if _, err := s.conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('outbox-cdc backfill ' || $1))`, s.slot); err != nil {
		return fmt.Errorf("wait for another instance's backfill of slot %q: %w", s.slot, err)
	}
	return nil
}
