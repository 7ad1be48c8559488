package slot

import (
	"errors"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/retry"
)

// TestLossFromSlotRow: why a slot cannot continue, read from
// pg_replication_slots as each supported version spells it: 14 to 16 have
// wal_status alone (16 adds conflicting, for a standby's slot), 17 adds
// invalidation_reason, 18 its idle_timeout.
func TestLossFromSlotRow(t *testing.T) {
	cases := []struct {
		name string
		row  lossRow
		want Loss
	}{
		{"14: healthy", lossRow{walStatus: "reserved"}, LossNone},
		{"14: unreserved is still usable", lossRow{walStatus: "unreserved"}, LossNone},
		{"14: wal removed", lossRow{walStatus: "lost"}, LossWALRemoved},
		{"15: lost, confirmed position gone too", lossRow{walStatus: "lost", noConfirmed: true}, LossWALRemoved},
		{"16: conflicting with recovery", lossRow{walStatus: "reserved", conflicting: true}, LossInvalidated},
		{"17: wal_removed", lossRow{walStatus: "lost", reason: "wal_removed"}, LossWALRemoved},
		{"17: rows_removed", lossRow{walStatus: "reserved", reason: "rows_removed", conflicting: true}, LossInvalidated},
		{"17: wal_level_insufficient", lossRow{reason: "wal_level_insufficient"}, LossInvalidated},
		{"18: idle_timeout", lossRow{walStatus: "lost", reason: "idle_timeout"}, LossIdleTimeout},
		{"a reason a later version adds", lossRow{reason: "something_new"}, LossInvalidated},
		{"no confirmed position, no reason", lossRow{walStatus: "reserved", noConfirmed: true}, LossInvalidated},
		// Not the relay's to judge (ensureSlot refuses it by name): a
		// physical slot has no confirmed position, which is no loss.
		{"a standby's physical slot under the name", lossRow{walStatus: "reserved", noConfirmed: true, foreign: true}, LossNone},
		{"another database's lost slot under the name", lossRow{walStatus: "lost", foreign: true}, LossNone},
	}
	for _, c := range cases {
		if got := c.row.loss(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestLostSlotHeldIsWaitedFor: a lost slot that a process still holds
// (its walsender not yet ended) is a wait, not a failure: the relay's
// retry loop, which asks the error, tries again until it is let go.
func TestLostSlotHeldIsWaitedFor(t *testing.T) {
	err := lostHeld("s")
	if c := retry.Classify(err); c != retry.Transient {
		t.Errorf("Classify(%v) = %s, want transient", err, c)
	}
	if !errors.Is(err, ErrLostSlotHeld) {
		t.Errorf("%v is not ErrLostSlotHeld: the relay cannot tell it from another failure", err)
	}
}
