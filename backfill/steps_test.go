package backfill

import (
	"slices"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// TestSlotSteps: what a backfill does to the slot, in order. A heal of a
// lost slot resolves every table's order (which may refuse) and records
// the heal as due (the tables pending, its start) before it drops the
// slot: once the slot is gone, only that record says a heal is due, and a
// refusal or a crash after the drop would otherwise leave the next start
// to take the missing slot for a first start and publish nothing.
func TestSlotSteps(t *testing.T) {
	for _, c := range []struct {
		name        string
		loss        slot.Loss
		heal, force bool
		want        []step
	}{
		{"heal of an invalidated slot", slot.LossWALRemoved, true, false, []step{stepChoose, stepPending, stepDrop, stepCreate}},
		{"heal of an idle-timed-out slot", slot.LossIdleTimeout, true, false, []step{stepChoose, stepPending, stepDrop, stepCreate}},
		{"a missing slot, heal or backfill", slot.LossMissing, true, false, []step{stepChoose, stepPending, stepCreate}},
		{"a backfill on a new slot", slot.LossMissing, false, false, []step{stepChoose, stepPending, stepCreate}},
		{"a slot that streams", slot.LossNone, true, false, []step{stepExisting}},
		{"a forced backfill", slot.LossNone, false, true, []step{stepChoose, stepExisting}},
		{"an invalidated slot without heal (prepare refuses it)", slot.LossWALRemoved, false, false, []step{stepExisting}},
	} {
		if got := slotSteps(c.loss, c.heal, c.force); !slices.Equal(got, c.want) {
			t.Errorf("%s: steps %v, want %v", c.name, got, c.want)
		}
	}
}
