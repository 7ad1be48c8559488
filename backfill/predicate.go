package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/predicate"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Predicate is a --backfill-where that passed CheckPredicate: one boolean
// expression over the outbox table's own columns, calling no volatile
// function and reading no other relation. It is the only form in which a
// predicate reaches a query (Snapshot.Count, Snapshot.Rows), always inside
// parentheses, on the extended protocol (one statement per query), in a
// read-only transaction, with the relay's role.
type Predicate = predicate.Expr

// ParsePredicate judges where without a server (predicate.Parse): one
// expression, no statement separator, no parameter, no subquery.
// CheckPredicate goes on with what only the server can tell.
func ParsePredicate(where string) (Predicate, error) {
	return predicate.Parse("--backfill-where", where)
}

// withRowFilter is where narrowed to the rows filter (a --where, the
// table's publication row filter) lets through, both in their rendered
// forms (predicate.Expr.SQL: tokens alone, no comment), so that one cannot
// reach into the other; where alone when filter is empty.
func withRowFilter(where, filter string) (string, error) {
	if filter == "" {
		return where, nil
	}
	w, err := ParsePredicate(where)
	if err != nil {
		return "", err
	}
	f, err := predicate.Parse("--where", filter)
	if err != nil {
		return "", err
	}
	return "(" + w.SQL() + ") AND (" + f.SQL() + ")", nil
}

// predicateTimeout bounds CheckPredicate's statements.
const predicateTimeout = "30s"

// CheckPredicate judges where for a backfill of tb: ParsePredicate, then in
// a read-only transaction with a statement timeout it refuses a volatile
// function or operator (nothing the predicate calls may change anything or
// depend on when it runs), and has the server plan the backfill's SELECT:
// the plan must read tb alone, without a subplan. A predicate that does not
// parse or names what tb lacks is an error saying so.
func CheckPredicate(ctx context.Context, conn *pgx.Conn, tb decode.Table, where string) (Predicate, error) {
	p, err := ParsePredicate(where)
	if err != nil {
		return Predicate{}, fmt.Errorf("%w: %w", slot.ErrNotReady, err)
	}
	fail := func(format string, a ...any) (Predicate, error) {
		return Predicate{}, fmt.Errorf("%w: --backfill-where %q on %s: %s", slot.ErrNotReady, where, quoted(tb), fmt.Sprintf(format, a...))
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '"+predicateTimeout+"'"); err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	var scs string
	if err := tx.QueryRow(ctx, "SELECT current_setting('standard_conforming_strings')", pgx.QueryExecModeExec).Scan(&scs); err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	if scs != "on" {
		return fail("standard_conforming_strings is off on this server, so string constants cannot be judged; turn it on (the default)")
	}
	volatile, err := volatileNames(ctx, tx, p)
	if err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	if len(volatile) > 0 {
		return fail("calls %s, which is volatile: the predicate may call only immutable and stable functions and operators", strings.Join(volatile, ", "))
	}
	var plan []byte
	err = tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (VERBOSE, FORMAT JSON) SELECT * FROM %s WHERE (%s)", quoted(tb), p.SQL()), pgx.QueryExecModeExec).Scan(&plan)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fail("%s", strings.TrimSpace(pgErr.Message))
	}
	if err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	if why := judgePlan(plan, tb); why != "" {
		return fail("%s", why)
	}
	return p, nil
}

// volatileNames returns the functions and operators p uses of which some
// definition (any schema, any argument types) is volatile.
func volatileNames(ctx context.Context, tx pgx.Tx, p Predicate) ([]string, error) {
	rows, err := tx.Query(ctx, `
		SELECT DISTINCT p.proname || '()' FROM pg_proc p WHERE p.proname = ANY($1::text[]) AND p.provolatile = 'v'
		UNION
		SELECT DISTINCT 'operator ' || o.oprname FROM pg_operator o JOIN pg_proc p ON p.oid = o.oprcode
		WHERE o.oprname = ANY($2::text[]) AND p.provolatile = 'v'
		ORDER BY 1`, p.Funcs(), p.Ops())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// planNode is what judgePlan reads of an EXPLAIN (FORMAT JSON) node.
type planNode struct {
	NodeType    string     `json:"Node Type"`
	Relation    string     `json:"Relation Name"`
	Schema      string     `json:"Schema"`
	Parent      string     `json:"Parent Relationship"`
	SubplanName string     `json:"Subplan Name"`
	Plans       []planNode `json:"Plans"`
}

// planNodes a backfill's SELECT may plan to: scans of one table (and its
// partitions), and what gathers, sorts or filters them.
var planNodes = []string{"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan",
	"BitmapAnd", "BitmapOr", "Tid Scan", "Tid Range Scan", "Result", "Gather", "Gather Merge", "Append",
	"Merge Append", "Sort", "Incremental Sort", "Materialize", "Memoize"}

// judgePlan says why the plan is not a read of tb alone ("" when it is).
func judgePlan(raw []byte, tb decode.Table) string {
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		return fmt.Sprintf("unreadable plan (%v)", err)
	}
	var why string
	var walk func(n planNode)
	walk = func(n planNode) {
		switch {
		case why != "":
		case n.Parent == "SubPlan" || n.Parent == "InitPlan" || n.SubplanName != "":
			why = "the predicate holds a subquery; it must be one expression over the table's own columns"
		case !slices.Contains(planNodes, n.NodeType):
			why = fmt.Sprintf("the plan reads more than the table (%s); the predicate must be one expression over its own columns", n.NodeType)
		case n.Relation != "" && (n.Relation != tb.Name || n.Schema != tb.Schema) && n.Parent != "Member":
			why = fmt.Sprintf("the plan reads %s.%s; the predicate must read only %s", n.Schema, n.Relation, quoted(tb))
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return why
}
