package backfill

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// resumed is the state a backfill cut short resumes from. A record of an
// earlier version has no order (it ordered by the timestamp column when
// the table had one) and no snapshot (rows committed since the slot was
// created are then read too, and published twice).
func (p *Plan) resumed(ctx context.Context, conn *pgx.Conn, j job, st State) (State, error) {
	st.Phase = PhaseRunning
	if st.Order == "" && st.After == nil { // cut short before its first row
		order, err := ChooseOrder(ctx, conn, j.table, j.order)
		if err != nil {
			return st, err
		}
		st.Order = order
	}
	if st.Order == "" {
		legacy := OrderID
		if len(st.After.Values) == 2 {
			if _, err := ChooseOrder(ctx, conn, j.table, OrderTimestamp); err == nil {
				legacy = OrderTimestamp
			}
		}
		st.Order, st.After = legacy, legacyKey(st.After, legacy)
	}
	if st.Last == nil {
		p.log.Warn("resuming a backfill whose first snapshot's extent was not recorded (cut short before it was, forced, or recorded by an earlier version), in a snapshot of its own: rows committed since the slot was created may be published twice",
			slog.String("table", j.table.Qualified()), slog.Int64("done", st.Done), slog.Int64("total", st.Total))
	} else {
		p.log.Info("resuming a backfill cut short, up to the last row its first snapshot saw",
			slog.String("table", j.table.Qualified()), slog.Int64("done", st.Done), slog.Int64("total", st.Total),
			slog.String("order", string(st.Order)))
	}
	return st, nil
}

// legacyKey converts the resume key an earlier version recorded (its
// timestamp, nil for NULL, and its id) to the key of order: [id] for
// OrderID; for OrderTimestamp [timestamp, statement, id], the statement
// unknown (nil, which sorts first: rows of the same time are read again).
func legacyKey(after *Key, order Order) *Key {
	switch {
	case after == nil:
		return nil
	case order == OrderID:
		return &Key{Values: after.Values[1:]}
	}
	return &Key{Values: []*string{after.Values[0], nil, after.Values[1]}}
}
