package cleanup

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// column is a table column's type: its category (pg_type.typcategory) and
// its name, for errors.
type column struct{ cat, typ string }

func columnCategories(ctx context.Context, conn *pgx.Conn, name string) (map[string]column, error) {
	rows, err := conn.Query(ctx, `
		SELECT a.attname, t.typcategory::text, format_type(a.atttypid, a.atttypmod)
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, name)
	if err != nil {
		return nil, fmt.Errorf("cleanup: read columns of %s: %w", name, err)
	}
	cols := map[string]column{}
	var n string
	var c column
	if _, err := pgx.ForEachRow(rows, []any{&n, &c.cat, &c.typ}, func() error { cols[n] = c; return nil }); err != nil {
		return nil, fmt.Errorf("cleanup: read columns of %s: %w", name, err)
	}
	return cols, nil
}

// update builds UPDATE name SET … where: each column quoted, each value a
// parameter (now() as itself).
func update(name, where string, sets []Set, cols map[string]column) (statement, error) {
	if len(sets) == 0 {
		return statement{}, errNoSets
	}
	st := statement{reason: -1}
	var b strings.Builder
	b.WriteString("UPDATE " + name + " SET ")
	for i, set := range sets {
		col, ok := cols[set.Column]
		if !ok {
			return statement{}, fmt.Errorf("%w: %s has no column %q (--mark, --mark-dead)", ErrNotReady, name, set.Column)
		}
		if err := set.fits(col.cat, col.typ); err != nil {
			return statement{}, fmt.Errorf("%w: %s: %v", ErrNotReady, name, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{set.Column}.Sanitize() + " = ")
		switch set.kind {
		case setNow:
			b.WriteString("now()")
			continue
		case setReason:
			st.reason = len(st.args)
			st.args = append(st.args, "")
		default:
			st.args = append(st.args, set.value)
		}
		fmt.Fprintf(&b, "$%d", len(st.args)+1)
	}
	st.sql = b.String() + where
	return st, nil
}
