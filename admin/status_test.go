package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

func ptr[T any](v T) *T { return &v }

// TestStatusLines: the text report says what each fact means, and what to
// do where something is wrong.
func TestStatusLines(t *testing.T) {
	streaming := slot.SlotState{Slot: "s", Plugin: "pgoutput", Database: "app", Active: true, ActivePID: 42, Client: "outbox-cdc 10.0.0.1",
		Confirmed: 0x16B3748, Current: 0x16B3790, LagBytes: 72, RetainedBytes: 3 << 20, WALStatus: "reserved", SafeWALSize: ptr(int64(5 << 30)),
		Publication: true, ServerVersion: 160002}
	idle := streaming
	idle.Active, idle.WALStatus, idle.SafeWALSize, idle.Publication = false, "lost", nil, false
	tests := []struct {
		name string
		st   slot.SlotState
		want []string
	}{
		{"streaming", streaming, []string{
			"slot: s (plugin pgoutput, database app)",
			"consumer: streaming, pid 42 (outbox-cdc 10.0.0.1)",
			"confirmed: 0/16B3748",
			"current WAL: 0/16B3790",
			"lag: 72 bytes of WAL written since the confirmed position",
			"retained: 3.0 MiB of WAL kept for the slot",
			"wal_status: reserved",
			"safe_wal_size: 5.0 GiB",
			"publication: pub carries public.a,public.b: yes",
			"failover: no: logical slots do not survive a failover before PostgreSQL 17 (this is 16)",
			"backfill: public.b: done, 7 of 9 rows acknowledged (from the snapshot at 0/10), updated 2026-01-02T03:04:05Z",
		}},
		{"lost, nobody streaming, tables missing", idle, []string{
			"slot: s (plugin pgoutput, database app)",
			"consumer: none (events wait in the WAL until outbox-cdc run streams the slot)",
			"confirmed: 0/16B3748",
			"current WAL: 0/16B3790",
			"lag: 72 bytes of WAL written since the confirmed position",
			"retained: 3.0 MiB of WAL kept for the slot",
			"wal_status: lost: the slot was invalidated and can no longer stream; outbox-cdc run says what was lost and how to recover",
			"safe_wal_size: none",
			"publication: pub carries public.a,public.b: NO: outbox-cdc check names the missing tables and the ALTER PUBLICATION to run",
			"failover: no: logical slots do not survive a failover before PostgreSQL 17 (this is 16)",
			"backfill: public.b: done, 7 of 9 rows acknowledged (from the snapshot at 0/10), updated 2026-01-02T03:04:05Z",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := StatusReport{SlotState: tt.st, publication: "pub", tables: []string{"public.a", "public.b"},
				Backfills: map[string]backfill.State{
					"public.b":     {Table: "public.b", Phase: "done", ConsistentPoint: 0x10, Total: 9, Done: 7, Updated: time.Date(2026, 1, 2, 4, 4, 5, 0, time.FixedZone("CET", 3600))},
					"public.other": {Table: "public.other", Phase: "running"}, // not a table of this relay
				}}
			var got []string
			for _, l := range r.Lines() {
				got = append(got, l.Label+": "+l.Text)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestStatusJSON: the slot's state with its positions as text, and nothing
// of the text form's.
func TestStatusJSON(t *testing.T) {
	st := slot.SlotState{Slot: "s", Active: true, Confirmed: 0x100, WALStatus: "reserved", Publication: true}
	r := StatusReport{SlotState: st, ConfirmedLSN: pglogrepl.LSN(0x100).String(), publication: "pub", tables: []string{"public.a"}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"slot": "s", "active": true, "confirmed_lsn": "0/100", "wal_status": "reserved", "publication_carries_tables": true, "lag_bytes": 0.0} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v in %s", k, got[k], want, b)
		}
	}
	for _, k := range []string{"backfills", "publication", "tables", "Confirmed"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s in %s", k, b)
		}
	}
}

// TestFailoverLine: whether the slot survives a failover, and what is
// missing when it does not, or not safely.
func TestFailoverLine(t *testing.T) {
	tests := []struct {
		st   slot.SlotState
		want string
	}{
		{slot.SlotState{Synced: true, ServerVersion: 170000}, "yes: this server is a standby and its copy of the slot is synchronized"},
		{slot.SlotState{Failover: true, Standbys: 2, ServerVersion: 170000},
			"yes: failover-enabled, 2 physical standby(s) streaming; but synchronized_standby_slots is not set, so events a standby lacks can be published (see outbox-cdc check)"},
		{slot.SlotState{Failover: true, Standbys: 1, SynchronizedStandbySlots: "sb1", ServerVersion: 170000},
			"yes: failover-enabled, 1 physical standby(s) streaming, changes held until sb1 have them"},
		{slot.SlotState{Failover: true, ServerVersion: 180000}, "yes: failover-enabled, 0 physical standby(s) streaming"},
		{slot.SlotState{Standbys: 1, ServerVersion: 160000}, "no: logical slots do not survive a failover before PostgreSQL 17 (this is 16)"},
		{slot.SlotState{Standbys: 1, ServerVersion: 170004}, "no: not failover-enabled (1 physical standby(s) streaming); see outbox-cdc check"},
	}
	for _, tt := range tests {
		if got := FailoverLine(tt.st); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.st, got, tt.want)
		}
	}
}

// TestNoSlotError says what creates the slot, and is slot.ErrNoSlot.
func TestNoSlotError(t *testing.T) {
	err := fmt.Errorf("status: %w", &NoSlotError{Slot: "s"})
	if !strings.Contains(err.Error(), `slot "s" does not exist; outbox-cdc run (or setup) creates it`) || !errors.Is(err, slot.ErrNoSlot) {
		t.Errorf("%v", err)
	}
}
