package backfill

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Order is the order in which a backfill publishes a table's rows. One
// aggregate's events must reach Kafka in the order their transactions
// committed, so the order must follow commit order as closely as the
// server can tell.
type Order string

const (
	// OrderAuto picks OrderCommit when track_commit_timestamp is on, else
	// OrderTimestamp when the table has its timestamp column, and refuses
	// otherwise (see ChooseOrder).
	OrderAuto Order = "auto"
	// OrderCommit orders by each row's commit time
	// (pg_xact_commit_timestamp of its inserting transaction; rows
	// committed before track_commit_timestamp was on come first, by their
	// timestamp column when there is one), then by id.
	OrderCommit Order = "commit"
	// OrderTimestamp orders by the timestamp column (NULLs first), then by
	// id: the order a polling relay reads in. now() is a transaction's
	// start, so two overlapping transactions on one aggregate may come out
	// in start order rather than commit order.
	OrderTimestamp Order = "timestamp"
	// OrderID orders by the id column alone: right only when ids grow in
	// commit order (a sequence, with one writer per aggregate at a time).
	OrderID Order = "id"
)

// Spec is what a table's backfill reads: the rows Where selects, in Order.
type Spec struct {
	// Where selects the rows published from the slot's exported snapshot
	// before streaming begins (checked by CheckPredicate before any use);
	// empty: no backfill.
	Where string
	// RowFilter is the table's publication row filter (--where), empty for
	// none: the rows it leaves out never reach this relay's slot (another
	// relay, on another slot, publishes them), so the backfill leaves them
	// out too.
	RowFilter string
	// Order is the order rows are read in; default auto.
	Order Order
}

// Orders are the values --backfill-order takes.
var Orders = []Order{OrderAuto, OrderCommit, OrderTimestamp, OrderID}

// orderExpr is one expression of a backfill's order, with the SQL type its
// text form is cast back to when resuming.
type orderExpr struct{ sql, typ string }

// commitTime is a row's commit time.
const commitTime = "pg_xact_commit_timestamp(xmin)"

// statement orders rows of one transaction (one commit time, one now()) by
// the statement that inserted them, as the stream would: ids alone (random
// UUIDs) would reorder an aggregate's Created and Paid written together.
var statement = orderExpr{"cmin::text::bigint", "bigint"}

// exprs returns the order's expressions over tb, whose columns have types.
func (o Order) exprs(tb decode.Table, types map[string]string) ([]orderExpr, error) {
	id, ts := tb.Columns.ID, tb.Columns.Timestamp
	if _, ok := types[id]; !ok {
		return nil, fmt.Errorf("%w: outbox table %s has no id column %q", slot.ErrNotReady, quoted(tb), id)
	}
	idExpr := orderExpr{pgx.Identifier{id}.Sanitize(), types[id]}
	var tsExpr []orderExpr
	if _, ok := types[ts]; ok && ts != "" {
		tsExpr = []orderExpr{{pgx.Identifier{ts}.Sanitize(), types[ts]}}
	}
	switch o {
	case OrderCommit:
		return append(append([]orderExpr{{commitTime, "timestamptz"}}, tsExpr...), statement, idExpr), nil
	case OrderTimestamp:
		if tsExpr == nil {
			return nil, fmt.Errorf("%w: --backfill-order=timestamp: outbox table %s has no timestamp column %q", slot.ErrNotReady, quoted(tb), ts)
		}
		return append(tsExpr, statement, idExpr), nil
	case OrderID:
		return []orderExpr{idExpr}, nil
	}
	return nil, fmt.Errorf("backfill order %q unknown", o)
}

// afterKey is the condition "the row comes after values" in exprs' order
// (ascending, NULLs first), or with orEqual "at or after", binding values
// as parameters appended to args; it is never NULL, so NOT afterKey(…) is "at
// or before" (with orEqual, "before").
func afterKey(exprs []orderExpr, values []*string, args *[]any, orEqual bool) string {
	if len(exprs) == 0 {
		return strconv.FormatBool(orEqual)
	}
	e, v := exprs[0], values[0]
	if v == nil { // every non-NULL value comes after NULL
		return fmt.Sprintf("(%s IS NOT NULL OR (%s IS NULL AND %s))", e.sql, e.sql, afterKey(exprs[1:], values[1:], args, orEqual))
	}
	*args = append(*args, *v)
	p := fmt.Sprintf("$%d::text::%s", len(*args), e.typ)
	// Never NULL: a NULL expression sorts first, so it is not after p.
	return fmt.Sprintf("(%s IS NOT NULL AND (%s > %s OR (%s = %s AND %s)))", e.sql, e.sql, p, e.sql, p, afterKey(exprs[1:], values[1:], args, orEqual))
}

// ChooseOrder resolves want for tb on the server conn reaches: auto becomes
// commit or timestamp, or an error saying what to choose; commit needs
// track_commit_timestamp.
func ChooseOrder(ctx context.Context, conn *pgx.Conn, tb decode.Table, want Order) (Order, error) {
	var track string
	if err := conn.QueryRow(ctx, "SELECT current_setting('track_commit_timestamp')").Scan(&track); err != nil {
		return "", fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	types, err := columnTypes(ctx, conn, tb)
	if err != nil {
		return "", err
	}
	_, hasTS := types[tb.Columns.Timestamp]
	hasTS = hasTS && tb.Columns.Timestamp != ""
	switch {
	case want == OrderCommit && track != "on":
		return "", fmt.Errorf("%w: --backfill-order=commit needs track_commit_timestamp = on (it records commits from then on)", slot.ErrNotReady)
	case want == OrderTimestamp && !hasTS:
		return "", fmt.Errorf("%w: --backfill-order=timestamp: outbox table %s has no timestamp column %q", slot.ErrNotReady, quoted(tb), tb.Columns.Timestamp)
	case want != OrderAuto && want != "":
		return want, nil
	case track == "on":
		return OrderCommit, nil
	case hasTS:
		return OrderTimestamp, nil
	}
	return "", fmt.Errorf("%w: the backfill of %s cannot follow commit order: the table has no timestamp column (--column-timestamp) and track_commit_timestamp is off, "+
		"so ordering by id would publish an aggregate's events out of order unless ids grow in commit order. "+
		"Choose: --backfill-order=id if ids come from a sequence, or turn track_commit_timestamp on (rows committed after that follow commit order)",
		slot.ErrNotReady, quoted(tb))
}

// ParseOrder reads an --backfill-order value.
func ParseOrder(s string) (Order, error) {
	for _, o := range Orders {
		if strings.EqualFold(s, string(o)) {
			return o, nil
		}
	}
	return "", fmt.Errorf("--backfill-order %q: want one of auto, commit, timestamp, id", s)
}

func quoted(tb decode.Table) string { return pgx.Identifier{tb.Schema, tb.Name}.Sanitize() }
