package backfill

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// The backfill runs its predicate with search_path pg_catalog (searchPath),
// so that each name it calls is the built-in the allow-list means. A column
// whose type lives elsewhere has its own operators elsewhere, out of reach:
// a citext column (the citext extension's type, in public) would be
// compared through its implicit cast to text with text's operators,
// silently case-sensitive, and the backfill would read other rows than its
// writer meant. CheckPredicate refuses such a predicate rather than reopen
// the search_path; casting the column at once (email::text) says which
// built-in comparison is meant.

// columnType is what CheckPredicate learns of a column's type.
type columnType struct {
	declared string // as format_type renders it: public.citext, text[], …
	// schema and kind (pg_type.typtype: b base, e enum, c composite, r
	// range, m multirange) are those of the type its values compare as:
	// a domain's base type, an array's element type, followed down.
	schema, kind string
}

// judgeColumnTypes says why p cannot run as its writer means, given the
// types of the outbox table's columns by name ("" when it can): a column
// it reads as it is, of a type outside pg_catalog. An enum is fine
// wherever it lives: its operators are pg_catalog's (anyenum). A name
// types lacks is no column of the table (a whole-row reference), or one
// the server's plan has already refused.
func judgeColumnTypes(p Predicate, types map[string]columnType) string {
	for _, c := range p.Columns() {
		ct, ok := types[c.Name]
		if c.Cast || !ok || ct.schema == "pg_catalog" || ct.kind == "e" {
			continue
		}
		return fmt.Sprintf("column %q is of type %s, not a built-in type of pg_catalog: the backfill resolves the predicate's "+
			"operators and functions in pg_catalog alone, where that type's own are not found and a comparison could "+
			"silently take text's (case-sensitive for citext); cast the column at once to the built-in type you mean "+
			"it compared as (%s::text = 'x', or lower(%s::text) = 'x' for a case-insensitive match)",
			c.Name, ct.declared, quoteIdent(c.Name), quoteIdent(c.Name))
	}
	return ""
}

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// columnTypesQuery reads the types of the columns $3 of the table $2 in
// schema $1: as declared, and then through domains (typbasetype) and
// arrays (typelem) down to the type the values compare as. Names are
// parameters, never pasted into the query.
const columnTypesQuery = `WITH RECURSIVE t(attname, declared, typid, depth) AS (
	SELECT a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod), a.atttypid, 0
	FROM pg_catalog.pg_attribute a
	JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
	JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname::text = $1 AND c.relname::text = $2 AND a.attname::text = ANY ($3) AND NOT a.attisdropped
  UNION ALL
	SELECT t.attname, t.declared, CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.typelem END, t.depth + 1
	FROM t JOIN pg_catalog.pg_type ty ON ty.oid = t.typid
	WHERE (ty.typtype = 'd' OR ty.typcategory = 'A' AND ty.typelem <> 0) AND t.depth < 16
)
SELECT DISTINCT ON (t.attname) t.attname, t.declared, n.nspname::text, ty.typtype::text
FROM t
JOIN pg_catalog.pg_type ty ON ty.oid = t.typid
JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace
ORDER BY t.attname, t.depth DESC`

// predicateColumnTypes reads the types of those of p's columns it reads as
// they are (not cast at once) that tb has.
func predicateColumnTypes(ctx context.Context, tx pgx.Tx, tb decode.Table, p Predicate) (map[string]columnType, error) {
	var names []string
	for _, c := range p.Columns() {
		if !c.Cast && !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	types := map[string]columnType{}
	if len(names) == 0 {
		return types, nil
	}
	rows, err := tx.Query(ctx, columnTypesQuery, pgx.QueryExecModeExec, tb.Schema, tb.Name, names)
	if err != nil {
		return nil, fmt.Errorf("read the types of %s's columns: %w", quoted(tb), err)
	}
	var name string
	var ct columnType
	if _, err := pgx.ForEachRow(rows, []any{&name, &ct.declared, &ct.schema, &ct.kind}, func() error {
		types[name] = ct
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the types of %s's columns: %w", quoted(tb), err)
	}
	return types, nil
}
