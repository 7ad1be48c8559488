package slot

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// SlotState is where a replication slot stands, as pg_replication_slots
// and pg_stat_replication tell it.
type SlotState struct {
	Slot      string        `json:"slot"`
	Plugin    string        `json:"plugin"`
	Database  string        `json:"database"`
	Active    bool          `json:"active"`               // a consumer streams it now
	ActivePID int           `json:"active_pid,omitempty"` // the walsender serving that consumer
	Client    string        `json:"client,omitempty"`     // the consumer's application_name and address
	Confirmed pglogrepl.LSN `json:"-"`
	Restart   pglogrepl.LSN `json:"-"`
	Current   pglogrepl.LSN `json:"-"` // the server's current WAL position
	// LagBytes is WAL written since the confirmed position: what a restart
	// would read again, at most.
	LagBytes int64 `json:"lag_bytes"`
	// RetainedBytes is WAL the slot keeps from being removed.
	RetainedBytes int64  `json:"retained_bytes"`
	WALStatus     string `json:"wal_status"` // reserved, extended, unreserved or lost
	// SafeWALSize is how much more WAL can be written before the slot is
	// at risk of losing what it needs; nil when max_slot_wal_keep_size is
	// unlimited (-1).
	SafeWALSize *int64 `json:"safe_wal_size"`
	// Publication says whether the publication carries every outbox table.
	Publication bool `json:"publication_carries_tables"`
	// Failover says the slot is synchronized to standbys that have
	// sync_replication_slots on (PostgreSQL 17+), so it survives a failover;
	// Synced that this server is such a standby and the slot a copy.
	Failover bool `json:"failover"`
	Synced   bool `json:"synced"`
	// ServerVersion is server_version_num, 150000 for 15.0; Server asks
	// what it can do.
	ServerVersion int `json:"server_version_num"`
	// Standbys are the physical standbys streaming from this server, and
	// StandbySlots the physical slots they stream through.
	Standbys     int      `json:"physical_standbys"`
	StandbySlots []string `json:"physical_standby_slots,omitempty"`
	// SynchronizedStandbySlots is the primary's synchronized_standby_slots
	// (17+): the standbys' slots the slot's changes wait for, so that no
	// event is published whose row a promoted standby lacks.
	SynchronizedStandbySlots string `json:"synchronized_standby_slots,omitempty"`
	// InRecovery says this server is a standby; Current is then the WAL
	// it has replayed.
	InRecovery bool `json:"in_recovery"`
}

// Server is what the slot's server can do, by its version.
func (st SlotState) Server() Server { return Server{Num: st.ServerVersion} }

// ReadSlotState reads where t's slot stands. conn is an ordinary connection.
func ReadSlotState(ctx context.Context, conn *pgx.Conn, t Target) (SlotState, error) {
	st := SlotState{Slot: t.Slot}
	var confirmed, restart, current *string
	var lag, retained *int64
	// On a standby, pg_current_wal_lsn() is an error: its position is the
	// WAL it has replayed.
	err := conn.QueryRow(ctx, `
		WITH w AS (SELECT pg_is_in_recovery() AS standby,
			CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn)
		SELECT coalesce(s.plugin, ''), coalesce(s.database, ''), s.active, coalesce(s.active_pid, 0),
			coalesce(r.application_name || coalesce(' ' || host(r.client_addr), ''), ''),
			s.confirmed_flush_lsn::text, s.restart_lsn::text, w.lsn::text,
			pg_wal_lsn_diff(w.lsn, s.confirmed_flush_lsn)::bigint,
			pg_wal_lsn_diff(w.lsn, s.restart_lsn)::bigint,
			coalesce(s.wal_status, ''), s.safe_wal_size,
			NOT EXISTS (SELECT 1 FROM unnest($3::text[]) q WHERE NOT EXISTS (
				SELECT 1 FROM pg_publication_tables p WHERE p.pubname = $2 AND p.schemaname || '.' || p.tablename = q)),
			coalesce((to_jsonb(s) ->> 'failover')::bool, false), coalesce((to_jsonb(s) ->> 'synced')::bool, false),
			current_setting('server_version_num')::int,
			ARRAY(SELECT p.slot_name::text FROM pg_replication_slots p JOIN pg_stat_replication r2 ON r2.pid = p.active_pid
				WHERE p.slot_type = 'physical' ORDER BY 1),
			coalesce(current_setting('synchronized_standby_slots', true), ''), w.standby
		FROM pg_replication_slots s CROSS JOIN w LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, t.Slot, t.Publication, t.qualified()).
		Scan(&st.Plugin, &st.Database, &st.Active, &st.ActivePID, &st.Client, &confirmed, &restart, &current,
			&lag, &retained, &st.WALStatus, &st.SafeWALSize, &st.Publication, &st.Failover, &st.Synced, &st.ServerVersion,
			&st.StandbySlots, &st.SynchronizedStandbySlots, &st.InRecovery)
	st.Standbys = len(st.StandbySlots)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("%w: %q", ErrNoSlot, t.Slot)
	}
	if err != nil {
		return st, fmt.Errorf("read replication slot %q: %w", t.Slot, err)
	}
	for _, p := range []struct {
		text *string
		lsn  *pglogrepl.LSN
	}{{confirmed, &st.Confirmed}, {restart, &st.Restart}, {current, &st.Current}} {
		if p.text == nil {
			continue
		}
		if *p.lsn, err = pglogrepl.ParseLSN(*p.text); err != nil {
			return st, fmt.Errorf("parse LSN %q of slot %q: %w", *p.text, t.Slot, err)
		}
	}
	if lag != nil {
		st.LagBytes = *lag
	}
	if retained != nil {
		st.RetainedBytes = *retained
	}
	return st, nil
}
