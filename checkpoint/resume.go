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
	// Switches are where Timeline branched from each of its ancestors
	// (the server's timeline history): WAL of an ancestor below its switch
	// point is this server's history too.
	Switches map[int32]pglogrepl.LSN
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
	// Ghosts, when set, is WAL of the checkpoint's timeline that the
	// server never had: transactions Kafka holds that a failed primary
	// committed past the point its successor branched.
	Ghosts *Ghosts
}

// Ghosts is the WAL of an ancestor timeline past the server's switch point
// from it, up to the checkpoint's end: the transactions committed there are
// in Kafka, and in no database from now on.
type Ghosts struct {
	Timeline int32
	From, To pglogrepl.LSN
}

// Resume decides where to start from the slot's confirmed position, the
// server streamed from, and the last committed checkpoint (found false when
// there is none). It trusts the checkpoint only when it is ahead of the
// slot and comes from the same system and timeline, or from an ancestor of
// the server's timeline up to the point the server branched from it
// (afterFailover): the slot is confirmed
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
		branch, ok := current.Switches[rec.Timeline]
		if !ok {
			return slot(fmt.Sprintf("%s is of timeline %d, not an ancestor of the server's timeline %d: trusting the slot at %s; events after it may repeat",
				at, rec.Timeline, current.Timeline, slotConfirmed), true)
		}
		return afterFailover(slotConfirmed, current, rec, branch, at)
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

// afterFailover is Resume for a checkpoint of an ancestor of the server's
// timeline, which branched from it at branch: WAL below branch is history
// both share, so the checkpoint is trusted up to the lower of its end and
// branch; past branch the old timeline's transactions are ghosts, and the
// server's own LSNs there name other transactions, which are streamed.
func afterFailover(slotConfirmed pglogrepl.LSN, current System, rec Record, branch pglogrepl.LSN, at string) Decision {
	d := Decision{Start: min(rec.EndLSN, branch)}
	lineage := fmt.Sprintf("%s is of timeline %d, from which the server's timeline %d branched at %s", at, rec.Timeline, current.Timeline, branch)
	if rec.EndLSN > branch {
		d.Ghosts = &Ghosts{Timeline: rec.Timeline, From: branch, To: rec.EndLSN}
		d.Warn = true
		lineage += fmt.Sprintf("; Kafka holds the transactions timeline %d committed from %s to %s, which the server never had "+
			"(reconcile them: outbox_cdc_failover_ghost_bytes)", rec.Timeline, branch, rec.EndLSN)
	}
	if d.Start <= slotConfirmed {
		d.Start = slotConfirmed
		d.Reason = fmt.Sprintf("%s; trusted up to %s, behind the slot at %s: starting at the slot", lineage, min(rec.EndLSN, branch), slotConfirmed)
		return d
	}
	d.Reason = fmt.Sprintf("%s; trusted up to %s, ahead of the slot at %s: starting at the checkpoint, skipping the transactions Kafka already holds",
		lineage, d.Start, slotConfirmed)
	return d
}
