package checkpoint

import (
	"fmt"

	"github.com/jackc/pglogrepl"
)

// System is the Postgres history a position belongs to: the cluster's
// system identifier and its current timeline, as IDENTIFY_SYSTEM reports
// them on the replication connection.
type System struct {
	ID       string
	Timeline int32
}

func (s System) String() string { return fmt.Sprintf("system %s timeline %d", s.ID, s.Timeline) }

// Decision is where a relay in exactly-once mode starts streaming, and why.
type Decision struct {
	// Start is the LSN to start replication from: the slot's confirmed
	// position, or the checkpoint's end when it is ahead (Postgres then skips
	// the transactions Kafka already holds).
	Start pglogrepl.LSN
	// Reason says why, for the log; Warn says it is a warning (events after
	// Start may be published a second time) rather than information.
	Reason string
	Warn   bool
}

// Resume decides where to start from the slot's confirmed position, the
// server streamed from, and the last committed checkpoint (found false when
// there is none). It trusts the checkpoint only when it is ahead of the
// slot and comes from the same system and timeline: the slot is confirmed
// only after a Kafka commit, so it is never past the checkpoint's truth and
// trusting it loses nothing, at worst repeating events; whereas a position
// from another timeline may name different transactions on this one (a
// promoted standby reuses LSNs past its switch point), and trusting it
// could skip transactions Kafka never had.
func Resume(slotConfirmed pglogrepl.LSN, current System, rec Record, found bool) Decision {
	slot := func(reason string, warn bool) Decision {
		return Decision{Start: slotConfirmed, Reason: reason, Warn: warn}
	}
	at := fmt.Sprintf("checkpoint at %s (xid %d, %s timeline %d)", rec.EndLSN, rec.Xid, rec.SystemID, rec.Timeline)
	switch {
	case !found:
		return slot(fmt.Sprintf("no checkpoint: trusting the slot at %s (a first start in exactly-once; otherwise the checkpoint topic lost its record, "+
			"and events an earlier instance published after the slot may repeat)", slotConfirmed), true)
	case rec.SystemID != current.ID:
		return slot(fmt.Sprintf("%s is of system %s, the server is system %s: trusting the slot at %s; events after it may repeat",
			at, rec.SystemID, current.ID, slotConfirmed), true)
	case rec.Timeline != current.Timeline:
		return slot(fmt.Sprintf("%s is of timeline %d, the server is on timeline %d (a failover): trusting the slot at %s; events after it may repeat",
			at, rec.Timeline, current.Timeline, slotConfirmed), true)
	case rec.EndLSN == slotConfirmed:
		return slot(fmt.Sprintf("%s matches the slot: starting there", at), false)
	case rec.EndLSN < slotConfirmed:
		// Routine: while no event waits for a Kafka commit, the relay
		// confirms the slot past WAL without events (an idle outbox must
		// not pin WAL) and writes no checkpoint for it. The slot is never
		// confirmed past an uncommitted event, so it is the truth here.
		return slot(fmt.Sprintf("%s is behind the slot at %s, which moved past WAL without events since: starting at the slot",
			at, slotConfirmed), false)
	}
	return Decision{Start: rec.EndLSN, Reason: fmt.Sprintf("%s is ahead of the slot at %s: starting at the checkpoint, "+
		"skipping the transactions Kafka already holds", at, slotConfirmed)}
}
