package cleanup

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// unseen returns the events of batch to settle now, and puts back into
// ready, to be cleaned again shortly, those whose rows a statement did not
// find (found: what it returned) because the transaction that inserted
// them may not have been visible to its snapshot.
//
// The walsender sends a transaction once its commit record is flushed to
// the WAL; the committing backend makes it visible to other snapshots only
// after that (ProcArrayEndTransaction), and a busy server can take a while
// in between. A row published in that window is invisible to the DELETE
// (or the UPDATE of --mark), which finds nothing and succeeds: acking its
// event then would confirm the slot past a row never cleaned, left in the
// table for good. The status is read after the statement, so a commit
// that completed in between reads "committed" although the statement did
// not see it: a row not found is settled as gone (a replay after a crash
// cleaned it already, or someone deleted it) only when a statement run
// after its transaction was seen ended did not find it either.
func (c *Cleaner) unseen(ctx context.Context, conn *pgx.Conn, batch []settled, found map[row]bool) ([]settled, error) {
	var xids []int64
	for _, s := range batch {
		if missing(s, found) {
			xids = append(xids, int64(s.row.xid))
		}
	}
	if len(xids) == 0 {
		return batch, nil
	}
	running, err := inProgress(ctx, conn, xids)
	if err != nil {
		return batch, err
	}
	settle, again := sortUnseen(batch, found, running)
	if len(again) > 0 {
		c.mu.Lock()
		c.ready = append(again, c.ready...)
		c.mu.Unlock()
	}
	return settle, nil
}

// missing reports whether s's row should have been found and was not.
func missing(s settled, found map[row]bool) bool {
	return s.act != keep && s.row.xid != 0 && !found[row{table: s.row.table, id: s.row.id}]
}

// sortUnseen splits batch into the events to settle and those to clean
// again: a row not found whose transaction is still running, or ended
// only since the statement (as far as can be told: not yet rechecked), is
// cleaned again, marked rechecked once its transaction is seen ended.
func sortUnseen(batch []settled, found map[row]bool, running map[uint32]bool) (settle, again []settled) {
	for _, s := range batch {
		switch {
		case !missing(s, found):
			settle = append(settle, s)
		case running[s.row.xid]:
			again = append(again, s)
		case !s.rechecked:
			s.rechecked = true
			again = append(again, s)
		default:
			settle = append(settle, s)
		}
	}
	return settle, again
}

// xactStatus reads the status of 32-bit transaction ids, each widened to
// the xid8 of the epoch it belongs to (that of the current snapshot's
// xmax, or the one before for an id past xmax's low half: those ids were
// all assigned before the snapshot).
const xactStatus = `SELECT x, coalesce(pg_xact_status(((((s.m >> 32) - CASE WHEN x > (s.m & 4294967295) THEN 1 ELSE 0 END) << 32) | x)::text::xid8), '')
	FROM unnest($1::bigint[]) AS x, (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS m) AS s`

// inProgress returns which of xids are still in progress.
func inProgress(ctx context.Context, conn *pgx.Conn, xids []int64) (map[uint32]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, xactStatus, xids)
	if err != nil {
		return nil, fmt.Errorf("cleanup: read transaction status: %w", err)
	}
	running := map[uint32]bool{}
	var x int64
	var status string
	_, err = pgx.ForEachRow(rows, []any{&x, &status}, func() error {
		if status == "in progress" {
			running[uint32(x)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cleanup: read transaction status: %w", err)
	}
	return running, nil
}

// waitBeforeRetry is how long a flush that settled nothing, its rows'
// transactions still in progress, waits before the next.
const waitBeforeRetry = 10 * time.Millisecond

// pending reports whether events wait to be settled.
func (c *Cleaner) pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ready) > 0
}
