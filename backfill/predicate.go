package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/predicate"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Predicate is a --backfill-where that passed CheckPredicate: one boolean
// expression over the outbox table's own columns in the restricted grammar
// of predicate.Restrict, calling only allowed built-ins. It is the only
// form in which a predicate reaches a query (Snapshot.Count, Snapshot.Rows),
// always inside parentheses, on the extended protocol (one statement per
// query), in a read-only transaction, with the relay's role and search_path
// pg_catalog (so each name it calls is the built-in the allow-list means).
type Predicate = predicate.Expr

// ParsePredicate judges where without a server (predicate.ParseRestricted):
// one expression, no comment, over the table's columns, allowed functions,
// operators and casts only. CheckPredicate goes on with what only the
// server can tell.
func ParsePredicate(where string) (Predicate, error) {
	return predicate.ParseRestricted("--backfill-where", where)
}

// withRowFilter is where narrowed to the rows filter (a --where, the
// table's publication row filter) lets through, both in their rendered
// forms (predicate.Expr.SQL: tokens alone, no comment), so that one cannot
// reach into the other; where alone when filter is empty. The filter runs
// in the backfill's query too, so it is held to the same grammar.
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
	if err := predicate.Restrict("--where", f); err != nil {
		return "", err
	}
	return "(" + w.SQL() + ") AND (" + f.SQL() + ")", nil
}

// predicateTimeout bounds CheckPredicate's statements.
const predicateTimeout = "30s"

// CheckPredicate judges where for a backfill of tb: ParsePredicate, then,
// in a read-only transaction with a statement timeout and the backfill's
// search_path, it has the server plan the backfill's SELECT: the plan must
// read tb alone, without a subplan; and no column it reads may be of a
// type outside pg_catalog (judgeColumnTypes). A predicate that does not
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
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '"+predicateTimeout+"'; SET LOCAL search_path = "+searchPath); err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	var scs string
	if err := tx.QueryRow(ctx, "SELECT current_setting('standard_conforming_strings')", pgx.QueryExecModeExec).Scan(&scs); err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	if scs != "on" {
		return fail("standard_conforming_strings is off on this server, so string constants cannot be judged; turn it on (the default)")
	}
	var plan []byte
	err = tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (VERBOSE, FORMAT JSON) SELECT * FROM %s WHERE (%s)", quoted(tb), p.SQL()), pgx.QueryExecModeExec).Scan(&plan)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fail("%v", brief(err))
	}
	if err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	if why := judgePlan(plan, tb); why != "" {
		return fail("%s", why)
	}
	types, err := predicateColumnTypes(ctx, tx, tb, p)
	if err != nil {
		return Predicate{}, fmt.Errorf("check --backfill-where: %w", err)
	}
	if why := judgeColumnTypes(p, types); why != "" {
		return fail("%s", why)
	}
	return p, nil
}

// searchPath is the backfill's (CheckPredicate's, Snapshot's): pg_catalog
// alone, so that the allow-list's names (lower, =, ::text) are the
// built-ins, never a function or operator of the same name that a role
// able to create one in a schema of the usual search_path (public) made to
// match the arguments better. The table is always named with its schema.
const searchPath = "pg_catalog"

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
