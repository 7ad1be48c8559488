package metrics

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// TestSlotHealsCounted: each cause's heal counter is exported at 0 from
// the start (so that the alert's increase() sees the first heal), a heal
// counts its cause and its rows, and the last heal's end is a timestamp,
// 0 before any.
func TestSlotHealsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New("test", reg, Live{InFlight: func() (int, int64) { return 0, 0 }, Confirmed: func() pglogrepl.LSN { return 0 },
		Received: func() pglogrepl.LSN { return 0 }, Streaming: func() bool { return false }, StandingBy: func() bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "outbox_cdc_slot_heals_total"); err != nil || n != len(slot.Losses) {
		t.Fatalf("heal series before any heal: %d (%v), want one per cause (%d)", n, err, len(slot.Losses))
	}
	if got := testutil.ToFloat64(m.heal.last); got != 0 {
		t.Errorf("last heal before any: %v, want 0", got)
	}
	end := time.Unix(1_700_000_000, 0)
	m.SlotHealed(slot.LossWALRemoved, 120, end)
	m.SlotHealed(slot.LossWALRemoved, 3, end.Add(time.Minute))
	m.SlotHealed(slot.LossDropped, 0, end.Add(2*time.Minute))
	if got := testutil.ToFloat64(m.heal.heals.WithLabelValues("wal_removed")); got != 2 {
		t.Errorf("wal_removed heals: %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.heal.heals.WithLabelValues("dropped")); got != 1 {
		t.Errorf("dropped heals: %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.heal.rows); got != 123 {
		t.Errorf("heal rows: %v, want 123", got)
	}
	if got := testutil.ToFloat64(m.heal.last); got != float64(end.Add(2*time.Minute).Unix()) {
		t.Errorf("last heal: %v, want %d", got, end.Add(2*time.Minute).Unix())
	}
}
