package admin

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// checkBackfill is an item for each table with a backfill: its predicate
// plans (reading the table alone, calling only allowed built-ins), its order can
// be followed on this server, and the role may read the table.
func checkBackfill(ctx context.Context, cfg relay.Config) []checklist.Item {
	target := cfg.Target()
	var items []checklist.Item
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for i, t := range cfg.Tables {
		if t.Backfill.Where == "" {
			continue
		}
		name := "backfill of " + t.Qualified()
		if conn == nil {
			var err error
			if conn, err = pgx.Connect(ctx, cfg.PostgresURL); err != nil {
				return append(items, checklist.Item{Name: name, Status: checklist.Fail, Detail: checklist.OneLine(err)})
			}
		}
		it := backfillItem(ctx, conn, target.Tables[i], t.Backfill)
		it.Name = name
		items = append(items, it)
	}
	return items
}

// backfillItem judges one table's backfill on conn.
func backfillItem(ctx context.Context, conn *pgx.Conn, tb decode.Table, spec backfill.Spec) checklist.Item {
	quoted := pgx.Identifier{tb.Schema, tb.Name}.Sanitize()
	if _, err := backfill.CheckPredicate(ctx, conn, tb, spec.Where); err != nil {
		return checklist.Item{Status: checklist.Fail, Detail: checklist.OneLine(err),
			Fix: "correct --backfill-where: one boolean expression over the table's own columns, with only the functions, operators and casts the error lists"}
	}
	order, err := backfill.ChooseOrder(ctx, conn, tb, spec.Order)
	if err != nil {
		return checklist.Item{Status: checklist.Fail, Detail: checklist.OneLine(err), Fix: "set --backfill-order"}
	}
	var canSelect bool
	if err := conn.QueryRow(ctx, `SELECT has_table_privilege(current_user, $1, 'SELECT')`, quoted).Scan(&canSelect); err != nil {
		return checklist.Item{Status: checklist.Fail, Detail: "could not read the role's privileges on the table: " + checklist.OneLine(err)}
	}
	if !canSelect {
		return checklist.Item{Status: checklist.Fail, Detail: "the role may not SELECT the table, which the backfill reads",
			Fix: fmt.Sprintf("as the table's owner: GRANT SELECT ON %s TO the role (outbox-cdc setup --backfill-where … --role … does)", quoted)}
	}
	return checklist.Item{Status: checklist.OK,
		Detail: fmt.Sprintf("WHERE %s plans, reading the table alone; rows in %s order; the role may read the table", spec.Where, order)}
}
