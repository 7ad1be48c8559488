package slot

import (
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

const gib = int64(1) << 30

func int64p(n int64) *int64 { return &n }

// wantItem is what an item must say: its status, and words its detail
// and its fix contain (a fix of "-" must be empty).
type wantItem struct {
	status checklist.Status
	detail []string
	fix    []string
}

func (w wantItem) check(t *testing.T, it checklist.Item) {
	t.Helper()
	if it.Status != w.status {
		t.Errorf("status %s, want %s (%s)", it.Status, w.status, it.Detail)
	}
	for _, s := range w.detail {
		if !strings.Contains(it.Detail, s) {
			t.Errorf("detail %q lacks %q", it.Detail, s)
		}
	}
	for _, s := range w.fix {
		if s == "-" && it.Fix != "" {
			t.Errorf("fix %q, want none", it.Fix)
		}
		if s != "-" && !strings.Contains(it.Fix, s) {
			t.Errorf("fix %q lacks %q", it.Fix, s)
		}
	}
}

var since = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

// TestMaxSlotWALKeepSizeSaysHowLongARelayMayStop: the setting against the
// slot's retained WAL and the WAL rate, as the downtime a stopped relay
// has before its slot is invalidated.
func TestMaxSlotWALKeepSizeSaysHowLongARelayMayStop(t *testing.T) {
	heal := CheckOptions{Cleanup: "delete-after-publish", Heal: true}
	for _, tc := range []struct {
		name string
		r    risk
		o    CheckOptions
		want wantItem
	}{
		{name: "unlimited", r: risk{keep: -1, keepText: "-1"},
			want: wantItem{status: checklist.Warn, detail: []string{"unlimited: a stopped relay makes Postgres keep WAL until the disk fills"},
				fix: []string{"max_slot_wal_keep_size = '50GB'"}}},
		{name: "unlimited, the slot's WAL", r: risk{keep: -1, keepText: "-1", slot: &SlotState{RetainedBytes: 3 * gib / 2}},
			want: wantItem{status: checklist.Warn, detail: []string{"unlimited", "the slot keeps 1.5 GiB of WAL now"}}},
		{name: "unlimited, with heal the bound is what to set", r: risk{keep: -1, keepText: "-1"}, o: heal,
			want: wantItem{status: checklist.Warn, fix: []string{"--on-slot-lost heal recreates it"}}},
		{name: "bounded, no slot yet, no rate", r: risk{keep: 50 * gib, keepText: "50GB"},
			want: wantItem{status: checklist.OK, detail: []string{"50GB: a relay may fall 50.0 GiB of WAL behind before its slot is invalidated"}, fix: []string{"-"}}},
		{name: "bounded, no slot yet, at the WAL rate", r: risk{keep: 50 * gib, keepText: "50GB", rate: float64(gib) / 3600, rateSince: since},
			want: wantItem{status: checklist.OK, detail: []string{"a relay stopped now loses it after about 2 days", "1.0 GiB/h on average since 2025-03-01 08:00 UTC"}}},
		{name: "bounded, the slot's headroom", r: risk{keep: 50 * gib, keepText: "50GB", rate: float64(gib) / 3600, rateSince: since,
			slot: &SlotState{RetainedBytes: 10 * gib, SafeWALSize: int64p(40 * gib), WALStatus: "reserved"}},
			want: wantItem{status: checklist.OK, detail: []string{"the slot keeps 10.0 GiB of WAL, 40.0 GiB short of it", "about 40h"}}},
		{name: "a quarter left", r: risk{keep: 50 * gib, keepText: "50GB",
			slot: &SlotState{RetainedBytes: 40 * gib, SafeWALSize: int64p(10 * gib), WALStatus: "extended"}},
			want: wantItem{status: checklist.Warn, detail: []string{"10.0 GiB short of it"}, fix: []string{"outbox-cdc status", "raise max_slot_wal_keep_size"}}},
		{name: "less than an hour at the WAL rate", r: risk{keep: 50 * gib, keepText: "50GB", rate: float64(gib) / 60, rateSince: since},
			want: wantItem{status: checklist.Warn, detail: []string{"about 50 min"}, fix: []string{"raise max_slot_wal_keep_size"}}},
		{name: "passed", r: risk{keep: gib, keepText: "1GB", slot: &SlotState{RetainedBytes: 2 * gib, SafeWALSize: int64p(-gib), WALStatus: "unreserved"}},
			want: wantItem{status: checklist.Warn, detail: []string{"the slot keeps 2.0 GiB of WAL, past it (wal_status unreserved)"}}},
		{name: "passed, healing", r: risk{keep: gib, keepText: "1GB", slot: &SlotState{RetainedBytes: 2 * gib, SafeWALSize: int64p(-gib), WALStatus: "unreserved"}}, o: heal,
			want: wantItem{status: checklist.Warn, fix: []string{"--on-slot-lost heal recreates it"}}},
		{name: "invalidated already", r: risk{keep: gib, keepText: "1GB", rate: 1 << 20, rateSince: since, slot: &SlotState{WALStatus: "lost"}},
			want: wantItem{status: checklist.Warn, detail: []string{"1GB: the slot was invalidated already (wal_status lost)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.want.check(t, keepItem(tc.r, tc.o)) })
	}
}

// TestIdleSlotTimeoutSaysWhetherAStoppedRelayLosesItsSlot: PostgreSQL
// 18's idle_replication_slot_timeout, off or on, with or without a heal
// to recover.
func TestIdleSlotTimeoutSaysWhetherAStoppedRelayLosesItsSlot(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    risk
		o    CheckOptions
		want *wantItem // nil: no item
	}{
		{name: "before PostgreSQL 18", r: risk{}},
		{name: "off", r: risk{idleKnown: true, idleText: "0"},
			want: &wantItem{status: checklist.OK, detail: []string{"0 (off)"}}},
		{name: "on, no heal", r: risk{idleKnown: true, idle: 24 * time.Hour, idleText: "1d"}, o: CheckOptions{Cleanup: "none"},
			want: &wantItem{status: checklist.Warn, detail: []string{"1d: a relay stopped longer than that loses its slot"},
				fix: []string{"idle_replication_slot_timeout = '7d'", "--cleanup delete-after-publish or mark and --on-slot-lost heal"}}},
		{name: "on, heal possible but off", r: risk{idleKnown: true, idle: time.Hour, idleText: "1h"}, o: CheckOptions{Cleanup: "mark"},
			want: &wantItem{status: checklist.Warn, fix: []string{"--on-slot-lost heal"}}},
		{name: "on, heal without cleanup", r: risk{idleKnown: true, idle: time.Hour, idleText: "1h"}, o: CheckOptions{Cleanup: "none", Heal: true},
			want: &wantItem{status: checklist.Warn, fix: []string{"--cleanup delete-after-publish or mark"}}},
		{name: "on, healing", r: risk{idleKnown: true, idle: time.Hour, idleText: "1h"}, o: CheckOptions{Cleanup: "mark", Heal: true},
			want: &wantItem{status: checklist.OK, detail: []string{"1h: a relay stopped longer than that loses its slot", "--on-slot-lost heal recreates it"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := idleItem(tc.r, tc.o)
			if ok != (tc.want != nil) {
				t.Fatalf("item %v (%+v), want one: %v", ok, it, tc.want != nil)
			}
			if ok {
				tc.want.check(t, it)
			}
		})
	}
}

// TestLostSlotSaysWhetherItWouldHeal: --on-slot-lost and --cleanup decide
// what a lost slot costs; a warning only where Postgres itself may
// invalidate the slot and nothing would heal it.
func TestLostSlotSaysWhetherItWouldHeal(t *testing.T) {
	bounded := risk{keep: 50 * gib}
	for _, tc := range []struct {
		name string
		r    risk
		o    CheckOptions
		want wantItem
	}{
		{name: "heal without cleanup", r: bounded, o: CheckOptions{Cleanup: "none", Heal: true},
			want: wantItem{status: checklist.Fail, detail: []string{"--on-slot-lost heal needs --cleanup", "nothing in the table says"},
				fix: []string{"--cleanup delete-after-publish or --cleanup mark"}}},
		{name: "heal, delete-after-publish", r: bounded, o: CheckOptions{Cleanup: "delete-after-publish", Heal: true},
			want: wantItem{status: checklist.OK, detail: []string{"heals", "every row still in the outbox", "published but not yet deleted"}}},
		{name: "heal, mark", r: bounded, o: CheckOptions{Cleanup: "mark", Heal: true},
			want: wantItem{status: checklist.OK, detail: []string{"every row not yet marked", "published but not yet marked"}}},
		{name: "fail, cleanup, slot can be invalidated", r: bounded, o: CheckOptions{Cleanup: "mark"},
			want: wantItem{status: checklist.Warn, detail: []string{"--on-slot-lost fail: a lost slot stops the relay", "a heal is possible with --cleanup mark"},
				fix: []string{"--on-slot-lost heal"}}},
		{name: "fail, no cleanup, idle timeout", r: risk{keep: -1, idle: time.Hour}, o: CheckOptions{Cleanup: "none"},
			want: wantItem{status: checklist.Warn, detail: []string{"a heal is not possible with --cleanup none"},
				fix: []string{"--cleanup delete-after-publish (or mark) and --on-slot-lost heal"}}},
		{name: "fail, no cleanup, nothing invalidates the slot", r: risk{keep: -1}, o: CheckOptions{},
			want: wantItem{status: checklist.OK, detail: []string{"a heal is not possible with --cleanup none"}}},
		{name: "fail, cleanup, nothing invalidates the slot", r: risk{keep: -1}, o: CheckOptions{Cleanup: "delete-after-publish"},
			want: wantItem{status: checklist.OK, detail: []string{"a heal is possible with --cleanup delete-after-publish"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.want.check(t, lostItem(tc.r, tc.o)) })
	}
}

// TestLostSlotItem: a slot already lost is a failure the relay refuses,
// or, with a heal, a warning saying run heals it; the reason Postgres
// gives names the cause.
func TestLostSlotItem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		o      CheckOptions
		want   wantItem
	}{
		{name: "refused", reason: "wal_removed", o: CheckOptions{Cleanup: "none"},
			want: wantItem{status: checklist.Fail, detail: []string{`"s" was invalidated (wal_removed)`, "events may be missing"},
				fix: []string{"SELECT pg_drop_replication_slot('s')", "docs/operations.md"}}},
		{name: "healed by run", reason: "idle_timeout", o: CheckOptions{Cleanup: "mark", Heal: true},
			want: wantItem{status: checklist.Warn, detail: []string{`"s" was invalidated (idle_timeout)`, "run heals it"},
				fix: []string{"start outbox-cdc run"}}},
		{name: "heal refused without cleanup", reason: "wal_removed", o: CheckOptions{Cleanup: "none", Heal: true},
			want: wantItem{status: checklist.Fail, detail: []string{"events may be missing"}}},
		{name: "no reason (before PostgreSQL 17)", o: CheckOptions{},
			want: wantItem{status: checklist.Fail, detail: []string{`"s" lost the WAL it needs (wal_status lost)`}}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.want.check(t, lostSlotItem("s", tc.reason, tc.o)) })
	}
}

func TestAbout(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{20 * time.Second, "under a minute"},
		{50 * time.Minute, "50 min"},
		{2*time.Hour + 50*time.Minute + 20*time.Second, "2h50m"},
		{40 * time.Hour, "40h"},
		{50 * time.Hour, "2 days"},
	} {
		if got := about(tc.d); got != tc.want {
			t.Errorf("about(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestWALRate(t *testing.T) {
	now := since.Add(2 * time.Hour)
	for _, tc := range []struct {
		name  string
		bytes int64
		since time.Time
		want  float64
	}{
		{"since the last reset", 7200 << 20, since, 1 << 20},
		{"never reset", 7200 << 20, time.Time{}, 0},
		{"reset a moment ago", 1 << 20, now.Add(-10 * time.Second), 0},
	} {
		if got := walRate(tc.bytes, tc.since, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
