package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/internal/units"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// StatusReport is where a relay's slot stands, and its backfills. Its JSON
// is `outbox-cdc status --json`'s; Lines are the text form's.
type StatusReport struct {
	slot.SlotState
	ConfirmedLSN string `json:"confirmed_lsn"`
	RestartLSN   string `json:"restart_lsn"`
	CurrentLSN   string `json:"current_wal_lsn"`
	// Backfills are the tables' backfills of this slot, by schema.table.
	Backfills map[string]backfill.State `json:"backfills,omitempty"`
	// LastHeal is the slot's row in the heal table (--on-slot-lost heal),
	// its last heal's cause, time and rows; nil when none is recorded.
	LastHeal *backfill.HealRecord `json:"last_heal,omitempty"`

	// publication should carry tables (schema.table), for Lines.
	publication string
	tables      []string
}

// NoSlotError is a slot that does not exist yet; it wraps slot.ErrNoSlot.
type NoSlotError struct{ Slot string }

func (e *NoSlotError) Error() string {
	return fmt.Sprintf("slot %q does not exist; outbox-cdc run (or setup) creates it", e.Slot)
}

func (e *NoSlotError) Unwrap() error { return slot.ErrNoSlot }

// Status reads where cfg's slot stands, and the progress of the backfills
// recorded for it. A slot that does not exist is a *NoSlotError.
func Status(ctx context.Context, cfg relay.Config) (StatusReport, error) {
	r := StatusReport{publication: cfg.Slot.Publication, tables: tableNames(cfg)}
	conn, err := Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return r, err
	}
	defer conn.Close(context.Background())
	st, err := slot.ReadSlotState(ctx, conn, cfg.Target())
	if errors.Is(err, slot.ErrNoSlot) {
		return r, &NoSlotError{Slot: cfg.Slot.Name}
	}
	if err != nil {
		return r, err
	}
	r.SlotState = st
	r.ConfirmedLSN, r.RestartLSN, r.CurrentLSN = st.Confirmed.String(), st.Restart.String(), st.Current.String()
	if len(cfg.Tables) > 0 {
		if r.Backfills, err = backfill.ReadStates(ctx, conn, cfg.Tables[0].Schema, cfg.Slot.Name); err != nil {
			return r, err
		}
		h, found, err := backfill.ReadHeal(ctx, conn, cfg.Tables[0].Schema, cfg.Slot.Name)
		if err != nil {
			return r, err
		}
		if found {
			r.LastHeal = &h
		}
	}
	return r, nil
}

// Line is one line of the text report: a label and what it says.
type Line struct{ Label, Text string }

// Lines are the report as an operator reads it: each fact with what it
// means, and what to do where something is wrong.
func (r StatusReport) Lines() []Line {
	st := r.SlotState
	walStatus, safe := r.walLines()
	carries := "yes"
	if !st.Publication {
		carries = "NO: outbox-cdc check names the missing tables and the ALTER PUBLICATION to run"
	}
	lines := []Line{
		{"slot", fmt.Sprintf("%s (plugin %s, database %s)", st.Slot, st.Plugin, st.Database)},
		{"consumer", r.consumer()},
		{"confirmed", st.Confirmed.String()},
		{"current WAL", st.Current.String()},
		{"lag", units.Bytes(st.LagBytes) + " of WAL written since the confirmed position"},
		{"retained", units.Bytes(st.RetainedBytes) + " of WAL kept for the slot"},
		{"wal_status", walStatus},
		{"safe_wal_size", safe},
		{"publication", fmt.Sprintf("%s carries %s: %s", r.publication, strings.Join(r.tables, ","), carries)},
		{"failover", FailoverLine(st)},
	}
	for _, t := range r.tables {
		if b, ok := r.Backfills[t]; ok {
			lines = append(lines, Line{"backfill", fmt.Sprintf("%s: %s, %d of %d rows acknowledged (from the snapshot at %s), updated %s",
				b.Table, b.Phase, b.Done, b.Total, b.ConsistentPoint, b.Updated.UTC().Format(time.RFC3339))})
		}
	}
	if l := r.healLine(); l != "" {
		lines = append(lines, Line{"last heal", l})
	}
	return lines
}

// healLine says when the slot was last healed, why, and how many rows
// that published again; "" when it never was.
func (r StatusReport) healLine() string {
	h := r.LastHeal
	switch {
	case h == nil || h.Started == nil:
		return ""
	case h.Unfinished():
		return fmt.Sprintf("under way or cut short (cause %s), begun %s: the next start resumes it", h.Cause, h.Started.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s (cause %s): %d rows published again, %d heal(s) in all", h.Finished.UTC().Format(time.RFC3339), h.Cause, h.Rows, h.Heals)
}

// consumer says who streams the slot, if anyone.
func (r StatusReport) consumer() string {
	if !r.Active {
		return "none (events wait in the WAL until outbox-cdc run streams the slot)"
	}
	s := fmt.Sprintf("streaming, pid %d", r.ActivePID)
	if r.Client != "" {
		s += " (" + r.Client + ")"
	}
	return s
}

// walLines are the wal_status and safe_wal_size lines: whether the slot
// keeps the WAL it needs, and for how much longer.
func (r StatusReport) walLines() (walStatus, safe string) {
	walStatus, safe = r.WALStatus, "unlimited (max_slot_wal_keep_size = -1)"
	if r.SafeWALSize != nil {
		safe = units.Bytes(*r.SafeWALSize)
	}
	switch r.WALStatus {
	case "lost":
		safe = "none"
		walStatus = "lost: the slot was invalidated and can no longer stream; outbox-cdc run says what was lost and how to recover"
	case "unreserved":
		walStatus = "unreserved: the slot is about to lose WAL it needs; start outbox-cdc run now"
	}
	return walStatus, safe
}

// FailoverLine says whether the slot survives a failover to a standby, and
// what is missing when it does not, or not safely.
func FailoverLine(st slot.SlotState) string {
	switch {
	case st.Synced:
		return "yes: this server is a standby and its copy of the slot is synchronized"
	case st.Failover && st.Standbys > 0 && st.SynchronizedStandbySlots == "":
		return fmt.Sprintf("yes: failover-enabled, %d physical standby(s) streaming; but synchronized_standby_slots is not set, so events a standby lacks can be published (see outbox-cdc check)", st.Standbys)
	case st.Failover && st.SynchronizedStandbySlots != "":
		return fmt.Sprintf("yes: failover-enabled, %d physical standby(s) streaming, changes held until %s have them", st.Standbys, st.SynchronizedStandbySlots)
	case st.Failover:
		return fmt.Sprintf("yes: failover-enabled, %d physical standby(s) streaming", st.Standbys)
	case !st.Server().FailoverSlots():
		return fmt.Sprintf("no: logical slots do not survive a failover before PostgreSQL 17 (this is %d)", st.Server().Major())
	}
	return fmt.Sprintf("no: not failover-enabled (%d physical standby(s) streaming); see outbox-cdc check", st.Standbys)
}
