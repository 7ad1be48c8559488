package relay

import (
	"github.com/outbox-cdc/outbox-cdc/cleanup"
)

// SlotLostPolicy is what the relay does when its slot is lost: dropped,
// invalidated (max_slot_wal_keep_size, idle_replication_slot_timeout, a
// standby's recovery conflict), or absent where it existed before (a
// failover without slot sync, a restore from a base backup) (--on-slot-lost).
type SlotLostPolicy string

// Slot-lost policies.
const (
	// SlotLostFail stops the relay and says how to recover by hand: the
	// default, because a heal publishes again the rows published but not
	// yet cleaned when the slot was lost, which consumers must be ready for
	// (they drop them by id), and an operator should choose that.
	SlotLostFail SlotLostPolicy = "fail"
	// SlotLostHeal drops the lost slot, creates it anew exporting its
	// snapshot, and publishes from that snapshot every row the cleanup has
	// not settled (cleanup.Unpublished), in the backfill's order, before
	// streaming from the new slot: nothing committed to a table is lost.
	// Logical decoding messages (--message-prefix) in the lost range are in
	// no table and cannot be healed: a heal names them in its warning.
	SlotLostHeal SlotLostPolicy = "heal"
)

// validateSlotLost refuses a heal that nothing could read from: without a
// cleanup mode, or with --cleanup=mark marking dead letters alone, no row
// says whether its event was published. Logical decoding messages are not
// refused: the default --message-prefix relays them, a relay whose events
// are rows would otherwise have to turn messages off to heal, and the loss
// a heal cannot repair there is the loss fail leaves too; run warns of it
// at start and the heal's line names it.
func (c Config) validateSlotLost() error {
	switch c.OnSlotLost {
	case SlotLostFail:
		return nil
	case SlotLostHeal:
	default:
		return bad("OnSlotLost", "{OnSlotLost} %q: want fail or heal", c.OnSlotLost)
	}
	why := "nothing in the outbox table says which rows were published, so a heal could not tell what to publish again"
	if c.Cleanup != cleanup.DeleteAfterPublish && c.Cleanup != cleanup.Mark {
		return bad("OnSlotLost", "{OnSlotLost} heal needs {Cleanup} delete-after-publish or mark: without it %s", why)
	}
	for _, t := range c.CleanupTables() {
		if _, err := cleanup.Unpublished(c.Cleanup, t); err != nil {
			return bad("OnSlotLost", "{OnSlotLost} heal needs {Cleanup} with {Defaults.Mark}: %w (%s)", err, why)
		}
	}
	return nil
}
