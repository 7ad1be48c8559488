package backfill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// HealTable is the table, beside ProgressTable, where a relay (with either
// --on-slot-lost) and setup record that the slot exists here (so that a slot
// found missing later is told from a first start: the table survives a
// base backup and a failover, the slot does not) and its last heal, which
// outbox-cdc status shows. A row per slot.
const HealTable = "outbox_cdc_heal"

// HealRecord is a slot's row in HealTable.
type HealRecord struct {
	Slot string `json:"slot"`
	// KnownSince is when a relay first recorded the slot here.
	KnownSince time.Time `json:"known_since"`
	// Heals counts the heals of the slot; the fields below are the last's.
	Heals    int64      `json:"heals"`
	Cause    string     `json:"cause,omitempty"` // a slot.Loss
	Started  *time.Time `json:"started,omitempty"`
	Finished *time.Time `json:"finished,omitempty"` // nil, or before Started: under way or cut short
	Rows     int64      `json:"rows"`               // rows the last heal published again
}

// Unfinished says a heal began and has not ended: under way elsewhere, or
// cut short, and then resumed by the next heal.
func (h HealRecord) Unfinished() bool {
	return h.Started != nil && (h.Finished == nil || h.Finished.Before(*h.Started))
}

// HealTableSQL creates the heal table in schema.
func HealTableSQL(schema string) string {
	return `CREATE TABLE IF NOT EXISTS ` + pgx.Identifier{schema, HealTable}.Sanitize() + ` (
		slot text PRIMARY KEY, known_since timestamptz NOT NULL DEFAULT now(), heals bigint NOT NULL DEFAULT 0,
		cause text, started_at timestamptz, finished_at timestamptz, rows bigint NOT NULL DEFAULT 0)`
}

// ReadHeal returns slot's row in schema's heal table, and whether there is
// one: none when the table does not exist or the role may not read it.
func ReadHeal(ctx context.Context, conn *pgx.Conn, schema, slotName string) (HealRecord, bool, error) {
	name := pgx.Identifier{schema, HealTable}.Sanitize()
	var readable bool
	if err := conn.QueryRow(ctx, `SELECT CASE WHEN to_regclass($1) IS NULL THEN false
		ELSE has_table_privilege(to_regclass($1), 'SELECT') END`, name).Scan(&readable); err != nil || !readable {
		return HealRecord{}, false, err
	}
	h := HealRecord{Slot: slotName}
	var cause *string
	err := conn.QueryRow(ctx, `SELECT known_since, heals, cause, started_at, finished_at, rows FROM `+name+` WHERE slot = $1`, slotName).
		Scan(&h.KnownSince, &h.Heals, &cause, &h.Started, &h.Finished, &h.Rows)
	if errors.Is(err, pgx.ErrNoRows) {
		return HealRecord{}, false, nil
	}
	if err != nil {
		return HealRecord{}, false, fmt.Errorf("read %s: %w", name, err)
	}
	if cause != nil {
		h.Cause = *cause
	}
	return h, true, nil
}

// RecordSlot records that slot exists here (creating the heal table when
// missing), keeping the row when there is one.
func RecordSlot(ctx context.Context, conn *pgx.Conn, schema, slotName string) error {
	_, err := writeHeal(ctx, conn, schema, `INSERT INTO %s (slot) VALUES ($1) ON CONFLICT (slot) DO NOTHING`, slotName)
	return err
}

// RecordSlotSQL is RecordSlot as a statement, for setup, which creates the
// slot: the heal table must exist (HealTableSQL).
func RecordSlotSQL(schema, slotName string) string {
	return fmt.Sprintf(`INSERT INTO %s (slot) VALUES ('%s') ON CONFLICT (slot) DO NOTHING;`,
		pgx.Identifier{schema, HealTable}.Sanitize(), strings.ReplaceAll(slotName, "'", "''"))
}

// RecordHealStart records that a heal of slot for cause begins.
func RecordHealStart(ctx context.Context, conn *pgx.Conn, schema, slotName string, cause slot.Loss) error {
	_, err := writeHeal(ctx, conn, schema, `INSERT INTO %s AS h (slot, cause, started_at, rows) VALUES ($1, $2, clock_timestamp(), 0)
		ON CONFLICT (slot) DO UPDATE SET cause = excluded.cause, started_at = excluded.started_at, rows = 0`, slotName, string(cause))
	return err
}

// RecordHealEnd records that slot's heal ended, having published rows,
// and reports whether this call ended it (once per heal, however many
// instances saw it end) and, when it did, the heal as recorded: its cause
// and start as its instance recorded them, its end and rows.
func RecordHealEnd(ctx context.Context, conn *pgx.Conn, schema, slotName string, rows int64) (HealRecord, bool, error) {
	name, err := ensureHealTable(ctx, conn, schema)
	if err != nil {
		return HealRecord{}, false, err
	}
	h := HealRecord{Slot: slotName}
	var cause *string
	err = conn.QueryRow(ctx, `UPDATE `+name+` SET finished_at = clock_timestamp(), rows = $2, heals = heals + 1
		WHERE slot = $1 AND started_at IS NOT NULL AND (finished_at IS NULL OR finished_at < started_at)
		RETURNING known_since, heals, cause, started_at, finished_at, rows`, slotName, rows).
		Scan(&h.KnownSince, &h.Heals, &cause, &h.Started, &h.Finished, &h.Rows)
	if errors.Is(err, pgx.ErrNoRows) {
		return HealRecord{}, false, nil
	}
	if err != nil {
		return HealRecord{}, false, healWriteError(name, err)
	}
	if cause != nil {
		h.Cause = *cause
	}
	return h, true, nil
}

// writeHeal runs stmt (its %s the table) on the heal table in schema,
// creating the table when missing, and returns the rows it wrote.
func writeHeal(ctx context.Context, conn *pgx.Conn, schema, stmt string, args ...any) (int64, error) {
	name, err := ensureHealTable(ctx, conn, schema)
	if err != nil {
		return 0, err
	}
	tag, err := conn.Exec(ctx, fmt.Sprintf(stmt, name), args...)
	if err != nil {
		return 0, healWriteError(name, err)
	}
	return tag.RowsAffected(), nil
}

// ensureHealTable creates the heal table in schema when missing, and
// returns its quoted name.
func ensureHealTable(ctx context.Context, conn *pgx.Conn, schema string) (string, error) {
	name := pgx.Identifier{schema, HealTable}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
		return name, fmt.Errorf("look for %s: %w", name, err)
	}
	if exists {
		return name, nil
	}
	if _, err := conn.Exec(ctx, HealTableSQL(schema)); err != nil {
		return name, healWriteError(name, err)
	}
	return name, nil
}

// healWriteError is err, writing the heal table name; a role that may not
// is told what to run (slot.ErrNotReady).
func healWriteError(name string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("%w: the role may not create or write %s, where --on-slot-lost heal records its slot and heals; "+
			"run outbox-cdc setup --on-slot-lost heal --role … as the tables' owner", slot.ErrNotReady, name)
	}
	return fmt.Errorf("record in %s: %w", name, err)
}
