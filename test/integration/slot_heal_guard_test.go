package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// What a heal (--on-slot-lost heal) must not do: drop a slot that is not
// the relay's, heal silently over a slot someone else made, or forget a
// heal it has decided on.

// TestSlotHealSparesAnotherKindOfSlot: a physical slot (a standby's) under
// the relay's slot name has no confirmed position, which is no loss: the
// relay refuses it by name, as without heal, announces no heal, and the
// slot is still there, still physical.
func TestSlotHealSparesAnotherKindOfSlot(t *testing.T) {
	o := newOutbox(t, "healphys", defaultColumns)
	ctx := context.Background()
	if _, err := o.db.Exec(ctx, `SELECT pg_create_physical_replication_slot($1)`, o.name); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, o.args(append(healArgs, "--http-addr", "")...)...)
	if code == 0 || !strings.Contains(out, "not a logical pgoutput slot") || strings.Contains(out, healStartMsg) {
		t.Errorf("--on-slot-lost heal on a physical slot of its name: exit %d, want non-zero, %q and no heal:\n%s",
			code, "not a logical pgoutput slot", testkit.Tail(out, 10))
	}
	var kind string
	if err := o.db.QueryRow(ctx, `SELECT coalesce((SELECT slot_type FROM pg_replication_slots WHERE slot_name = $1), 'none')`, o.name).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	if kind != "physical" {
		t.Errorf("the physical slot %s is now %q: the heal dropped it", o.name, kind)
	}
}
