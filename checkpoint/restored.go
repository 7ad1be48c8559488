package checkpoint

import "fmt"

// firstNormalXid is Postgres's FirstNormalTransactionId: the ids below it
// are invalid (0), bootstrap (1) and frozen (2), never a decoded
// transaction's.
const firstNormalXid = 3

// CheckXid checks that the server has assigned rec's transaction id, given
// next, the server's next full (64-bit, epoch-widened) transaction id:
// pg_snapshot_xmax(pg_current_snapshot()). A database restored from a
// snapshot or a backup has assigned fewer ids than the history the
// checkpoint was written in: once new writes push its WAL past the
// checkpoint's position, the LSNs alone look sound, and trusting the
// checkpoint would skip the new transactions. An id not assigned yet is
// ErrRestored; a record that names no transaction (HasXid) passes.
//
// The record keeps 32 bits of the id; it is widened to the server's epoch
// by its distance from next, as Postgres widens an xid (within 2^31 of
// the next id). That holds for the checkpoint Resume trusts, one ahead of
// the slot: the slot's catalog xmin, no newer than the checkpoint's
// transaction, keeps the server from assigning 2^31 ids past it (the
// wraparound protection stops it first).
func CheckXid(rec Record, next uint64) error {
	if !rec.HasXid() {
		return nil
	}
	full, assigned := widen(rec.Xid, next)
	if assigned {
		return nil
	}
	at := fmt.Sprintf("xid %d", rec.Xid)
	if full != 0 {
		at = fmt.Sprintf("xid %d (%d in the server's epoch)", rec.Xid, full)
	}
	return fmt.Errorf("%w: the checkpoint at %s names %s, and the server's next transaction id is %d: "+
		"the database was restored from a snapshot or a backup (or is another one with the same system identifier)",
		ErrRestored, rec.EndLSN, at, next)
}

// HasXid says whether r names a transaction: not a message outside any
// transaction, nor the record a backfill starts from (xid 0).
func (r Record) HasXid() bool { return r.Xid >= firstNormalXid }

// widen returns xid as a full transaction id of the server whose next one
// is next, and whether the server has assigned it: before next, by at most
// 2^31 ids. full is 0 when xid is not within the server's history at all
// (before its first epoch).
func widen(xid uint32, next uint64) (full uint64, assigned bool) {
	ahead := int32(xid - uint32(next)) // the circular distance, as TransactionIdPrecedes
	if ahead >= 0 {
		return next + uint64(ahead), false
	}
	behind := uint64(-int64(ahead))
	if behind > next {
		return 0, false
	}
	return next - behind, true
}
