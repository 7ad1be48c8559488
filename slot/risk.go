package slot

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/internal/units"
)

// CheckOptions is what Check needs of the relay's configuration beyond
// the Target: what it would do with a lost slot. Plain values, so that
// slot/ knows no flag and no other room's types.
type CheckOptions struct {
	// Cleanup is --cleanup: none (or empty), delete-after-publish or mark.
	// Only with the last two does the outbox say which rows are unpublished.
	Cleanup string
	// Heal is --on-slot-lost heal: a lost slot is recreated and the rows
	// still in the outbox are published again from its snapshot.
	Heal bool
}

// healable says the outbox itself says what is unpublished, so that a
// heal is possible.
func (o CheckOptions) healable() bool { return o.Cleanup != "" && o.Cleanup != "none" }

// healing says a lost slot heals rather than stops the relay.
func (o CheckOptions) healing() bool { return o.Heal && o.healable() }

// shortBudget is the downtime below which the WAL a slot may still retain
// is a warning: less than an hour leaves no time to get a relay stopped at
// night streaming again by hand.
const shortBudget = time.Hour

// risk is what decides whether Postgres may invalidate the slot, and how
// long a stopped relay has before it does.
type risk struct {
	keep      int64  // max_slot_wal_keep_size in bytes; -1: unlimited
	keepText  string // as the server shows it: 50GB
	idleKnown bool   // the server has idle_replication_slot_timeout (18+)
	idle      time.Duration
	idleText  string
	// rate is the WAL written per second on average since rateSince
	// (pg_stat_wal); 0 when unknown.
	rate      float64
	rateSince time.Time
	// reason is the slot's invalidation_reason (17+); empty when valid,
	// absent, or on an older server.
	reason string
	slot   *SlotState // nil: the slot does not exist (yet)
}

// invalidatable says Postgres itself may invalidate the slot: a bounded
// max_slot_wal_keep_size or an idle timeout.
func (r risk) invalidatable() bool { return r.keep >= 0 || r.idle > 0 }

// readRisk reads the settings that bound the slot's life and the WAL
// rate. pg_stat_wal has existed since PostgreSQL 14, the oldest supported.
func readRisk(ctx context.Context, conn *pgx.Conn, slot string) (risk, error) {
	r := risk{keep: -1}
	var idleSeconds, walBytes *int64
	var reset *time.Time
	var now time.Time
	var reason *string
	err := conn.QueryRow(ctx, `
		SELECT current_setting('max_slot_wal_keep_size'),
			(SELECT CASE WHEN setting = '-1' THEN -1 ELSE pg_size_bytes(setting || coalesce(unit, '')) END
				FROM pg_settings WHERE name = 'max_slot_wal_keep_size'),
			coalesce(current_setting('idle_replication_slot_timeout', true), ''),
			(SELECT extract(epoch FROM (setting || coalesce(unit, 's'))::interval)::bigint
				FROM pg_settings WHERE name = 'idle_replication_slot_timeout'),
			(SELECT wal_bytes::bigint FROM pg_stat_wal), (SELECT stats_reset FROM pg_stat_wal), now(),
			(SELECT to_jsonb(s) ->> 'invalidation_reason' FROM pg_replication_slots s WHERE s.slot_name = $1)`, slot).
		Scan(&r.keepText, &r.keep, &r.idleText, &idleSeconds, &walBytes, &reset, &now, &reason)
	if err != nil {
		return r, fmt.Errorf("read the slot's limits: %w", err)
	}
	if idleSeconds != nil {
		r.idleKnown, r.idle = true, time.Duration(*idleSeconds)*time.Second
	}
	if walBytes != nil && reset != nil {
		r.rate, r.rateSince = walRate(*walBytes, *reset, now), *reset
	}
	if reason != nil {
		r.reason = *reason
	}
	return r, nil
}

// walRate is bytes per second over since..now; 0 when since is unknown or
// too recent to say anything.
func walRate(bytes int64, since, now time.Time) float64 {
	age := now.Sub(since)
	if since.IsZero() || age < time.Minute || bytes <= 0 {
		return 0
	}
	return float64(bytes) / age.Seconds()
}

// keepItem is max_slot_wal_keep_size against the slot's retained WAL and
// the WAL rate: how far, and so how long, a relay may stop before its slot
// is invalidated.
func keepItem(r risk, o CheckOptions) checklist.Item {
	const name = "max_slot_wal_keep_size"
	healNote := ""
	if o.healing() {
		healNote = " Past it, --on-slot-lost heal recreates it and publishes the outbox's rows again."
	}
	if r.keep < 0 {
		detail := "unlimited: a stopped relay makes Postgres keep WAL until the disk fills"
		if r.slot != nil {
			detail += fmt.Sprintf("; the slot keeps %s of WAL now", units.Bytes(r.slot.RetainedBytes))
		}
		return checklist.Item{Name: name, Status: checklist.Warn, Detail: detail,
			Fix: "ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf(); (size it to outlast your longest outage; past it the slot is invalidated)." + healNote}
	}
	headroom := r.keep
	var detail string
	if r.slot == nil {
		detail = fmt.Sprintf("%s: a relay may fall %s of WAL behind before its slot is invalidated", r.keepText, units.Bytes(r.keep))
	} else {
		if r.slot.SafeWALSize != nil {
			headroom = *r.slot.SafeWALSize
		} else {
			headroom = r.keep - r.slot.RetainedBytes
		}
		switch {
		case r.slot.WALStatus == "lost":
			headroom = 0 // its restart_lsn is gone: nothing retained, nothing safe
			detail = fmt.Sprintf("%s: the slot was invalidated already (wal_status lost)", r.keepText)
		case headroom <= 0:
			detail = fmt.Sprintf("%s: the slot keeps %s of WAL, past it (wal_status %s)", r.keepText, units.Bytes(r.slot.RetainedBytes), r.slot.WALStatus)
		default:
			detail = fmt.Sprintf("%s: the slot keeps %s of WAL, %s short of it", r.keepText, units.Bytes(r.slot.RetainedBytes), units.Bytes(headroom))
		}
	}
	budget := time.Duration(-1)
	if headroom > 0 && r.rate > 0 {
		budget = time.Duration(float64(headroom) / r.rate * float64(time.Second))
		detail += fmt.Sprintf(": a relay stopped now loses it after about %s (WAL written at %s/h on average since %s)",
			about(budget), units.Bytes(int64(r.rate*3600)), r.rateSince.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if headroom <= 0 || headroom < r.keep/4 || (budget >= 0 && budget < shortBudget) {
		return checklist.Item{Name: name, Status: checklist.Warn, Detail: detail,
			Fix: "get the relay streaming (outbox-cdc status says why the slot lags), or raise max_slot_wal_keep_size (ALTER SYSTEM SET …; SELECT pg_reload_conf();)." + healNote}
	}
	return checklist.Item{Name: name, Status: checklist.OK, Detail: detail}
}

// idleItem is PostgreSQL 18's idle_replication_slot_timeout; no item on
// an older server, which has none.
func idleItem(r risk, o CheckOptions) (checklist.Item, bool) {
	const name = "idle_replication_slot_timeout"
	switch {
	case !r.idleKnown:
		return checklist.Item{}, false
	case r.idle <= 0:
		return checklist.Item{Name: name, Status: checklist.OK, Detail: r.idleText + " (off): a stopped relay's slot is not invalidated for idleness"}, true
	}
	detail := r.idleText + ": a relay stopped longer than that loses its slot (no instance streaming it)"
	if o.healing() {
		return checklist.Item{Name: name, Status: checklist.OK, Detail: detail + "; --on-slot-lost heal recreates it and publishes the outbox's rows again"}, true
	}
	fix := "set it beyond your longest outage (ALTER SYSTEM SET idle_replication_slot_timeout = '7d'; SELECT pg_reload_conf();), or "
	if o.healable() {
		fix += "run with --on-slot-lost heal"
	} else {
		fix += "run with --cleanup delete-after-publish or mark and --on-slot-lost heal"
	}
	return checklist.Item{Name: name, Status: checklist.Warn, Detail: detail + ", and the events written meanwhile are not relayed", Fix: fix}, true
}

// lostItem says what a lost slot would cost with the relay's
// --on-slot-lost and --cleanup: a warning only where Postgres itself may
// invalidate the slot and nothing would heal it (a failover without slot
// sync, a restore, a drop by hand lose it anyway, hence the detail).
func lostItem(r risk, o CheckOptions) checklist.Item {
	const name = "lost slot"
	cleanup := o.Cleanup
	if cleanup == "" {
		cleanup = "none"
	}
	switch {
	case o.Heal && !o.healable():
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: "--on-slot-lost heal needs --cleanup: with --cleanup none nothing in the table says which rows were published",
			Fix:    "run with --cleanup delete-after-publish or --cleanup mark, or with --on-slot-lost fail"}
	case o.Heal:
		rows, repeats := "every row still in the outbox", "published but not yet deleted"
		if cleanup == "mark" {
			rows, repeats = "every row not yet marked", "published but not yet marked"
		}
		return checklist.Item{Name: name, Status: checklist.OK,
			Detail: fmt.Sprintf("--on-slot-lost heal: the relay heals a lost slot: it recreates it and publishes %s from its snapshot, then streams; rows %s are published again, and logical decoding messages of the lost range cannot be recovered", rows, repeats)}
	}
	detail := "--on-slot-lost fail: a lost slot stops the relay, and the events of the lost range are recovered by hand (docs/operations.md, A lost slot); "
	fix := "run with --on-slot-lost heal"
	if o.healable() {
		detail += fmt.Sprintf("a heal is possible with --cleanup %s", cleanup)
	} else {
		detail += fmt.Sprintf("a heal is not possible with --cleanup %s: nothing in the table says what was published", cleanup)
		fix = "run with --cleanup delete-after-publish (or mark) and --on-slot-lost heal, so that a lost slot heals from the outbox"
	}
	status := checklist.OK
	if r.invalidatable() {
		status = checklist.Warn
	}
	return checklist.Item{Name: name, Status: status, Detail: detail, Fix: fix}
}

// lostSlotItem is the replication slot's item when Postgres invalidated it
// (wal_status lost): run refuses it, or heals it. reason is its
// invalidation_reason (17+), empty on older servers.
func lostSlotItem(slot, reason string, o CheckOptions) checklist.Item {
	detail := fmt.Sprintf("%q lost the WAL it needs (wal_status lost)", slot)
	if reason != "" {
		detail = fmt.Sprintf("%q was invalidated (%s): the WAL it needs is gone", slot, reason)
	}
	if o.healing() {
		return checklist.Item{Name: "replication slot", Status: checklist.Warn, Detail: detail + "; run heals it from the outbox (--on-slot-lost heal)",
			Fix: "start outbox-cdc run: it recreates the slot and publishes the rows still in the outbox again"}
	}
	return checklist.Item{Name: "replication slot", Status: checklist.Fail, Detail: detail + ": events may be missing",
		Fix: fmt.Sprintf("reconcile, then SELECT pg_drop_replication_slot('%s'); run creates it anew (docs/operations.md, A lost slot); with --cleanup, --on-slot-lost heal does this itself", slot)}
}

// about is d for people, roughly: 50 min, 2h50m, 3 days.
func about(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		s := d.Round(time.Minute).String() // 2h50m0s
		s = s[:len(s)-2]                   // 2h50m
		if len(s) > 3 && s[len(s)-3:] == "h0m" {
			s = s[:len(s)-2]
		}
		return s
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}
