package checkpoint

import (
	"fmt"

	"github.com/jackc/pglogrepl"
)

// Backfill is how far a backfill got in committed Kafka transactions, in
// exactly-once: the record of each transaction that carries backfilled
// rows says which table, which backfill of it, and the last row committed,
// so that a backfill cut short resumes past exactly the rows Kafka holds.
// The Postgres progress table, written after each commit, may lag it by
// one commit; this record never does.
type Backfill struct {
	Table string // schema.table
	// ConsistentPoint and Snapshot name the backfill: the slot's
	// consistent point when it began (a slot dropped and created again
	// backfills again, from another point), and the snapshot it began in
	// (pg_snapshot's text form: a forced backfill's own, since its point
	// may be an earlier backfill's).
	ConsistentPoint pglogrepl.LSN
	Snapshot        string
	Done            int64     // rows committed, in the backfill's read order
	After           []*string // the key of the last of them; nil before the first
	Finished        bool      // every row of the table is committed
}

// wireBackfill is Backfill as JSON.
type wireBackfill struct {
	Table           string    `json:"table"`
	ConsistentPoint string    `json:"point"`
	Snapshot        string    `json:"snapshot,omitempty"`
	Done            int64     `json:"done"`
	After           []*string `json:"after,omitempty"`
	Finished        bool      `json:"finished,omitempty"`
}

func (b *Backfill) wire() *wireBackfill {
	if b == nil {
		return nil
	}
	return &wireBackfill{Table: b.Table, ConsistentPoint: b.ConsistentPoint.String(), Snapshot: b.Snapshot, Done: b.Done, After: b.After, Finished: b.Finished}
}

func (w *wireBackfill) backfill() (*Backfill, error) {
	if w == nil {
		return nil, nil
	}
	point, err := pglogrepl.ParseLSN(w.ConsistentPoint)
	if err != nil {
		return nil, fmt.Errorf("backfill point: %w", err)
	}
	b := &Backfill{Table: w.Table, ConsistentPoint: point, Snapshot: w.Snapshot, Done: w.Done, After: w.After, Finished: w.Finished}
	if err := b.validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// validate refuses progress no backfill could resume from.
func (b *Backfill) validate() error {
	switch {
	case b == nil:
		return nil
	case b.Table == "":
		return fmt.Errorf("backfill: no table")
	case b.ConsistentPoint == 0:
		return fmt.Errorf("backfill of %s: no consistent point", b.Table)
	case b.Done < 0:
		return fmt.Errorf("backfill of %s: %d rows done", b.Table, b.Done)
	case b.Done > 0 && b.After == nil:
		return fmt.Errorf("backfill of %s: %d rows done and no last key", b.Table, b.Done)
	}
	return nil
}
