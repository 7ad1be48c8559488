package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/predicate"
)

// filtered reports whether some table of t has a row filter.
func (t Target) filtered() bool {
	for _, w := range t.Where {
		if w != "" {
			return true
		}
	}
	return false
}

// filters parses t's row filters (predicate.Parse), by schema.name: the
// only form in which a --where reaches SQL is its Expr.SQL.
func (t Target) filters() (map[string]predicate.Expr, error) {
	out := map[string]predicate.Expr{}
	for name, where := range t.Where {
		if where == "" {
			continue
		}
		e, err := predicate.Parse("--where", where)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrNotReady, name, err)
		}
		out[name] = e
	}
	return out, nil
}

// publicationTables is names (schema.name) as a publication's table list
// spells them, each with its row filter: "a"."b" WHERE (x = 1), "c"."d".
func publicationTables(names []string, filters map[string]predicate.Expr) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quotedList([]string{n})
		if e, ok := filters[n]; ok {
			out[i] += " WHERE (" + e.SQL() + ")"
		}
	}
	return strings.Join(out, ", ")
}

// rowFilterUnsupported says why t's row filters cannot work on srv, or ""
// when they can (or t has none).
func rowFilterUnsupported(srv Server, t Target) string {
	if srv.RowFilters() || !t.filtered() {
		return ""
	}
	return fmt.Sprintf("--where needs PostgreSQL %d or newer: it becomes a publication row filter (CREATE PUBLICATION … WHERE), which PostgreSQL %d lacks; upgrade, or run one relay for every row without --where",
		MinRowFilterVersion/10000, srv.Major())
}

// filterDrift is how a publication's row filters differ from t's: the
// tables whose filter differs, and the statement that makes them t's.
type filterDrift struct {
	tables []string // schema.name
	alter  string   // ALTER PUBLICATION … SET TABLE …; "" when none differs
}

// message is the drift in one line, saying what to run.
func (d filterDrift) message(pub string) string {
	return fmt.Sprintf("publication %q filters the rows of %s otherwise than --where says; outbox-cdc never alters a row filter itself: run %s (or outbox-cdc setup), or choose another --publication",
		pub, quotedList(d.tables), d.alter)
}

// readDrift compares the row filters of t's publication (which exists
// and carries t's tables) with t's own. A filter the publication has and
// t lacks is a drift too: the relay would miss rows. Servers before
// PostgreSQL 15 have none (rowFilterUnsupported refuses t's).
func readDrift(ctx context.Context, conn *pgx.Conn, t Target, srv Server) (filterDrift, error) {
	var d filterDrift
	if !srv.RowFilters() || len(t.Tables) == 0 {
		return d, nil
	}
	filters, err := t.filters()
	if err != nil {
		return d, err
	}
	rows, err := conn.Query(ctx, `
		SELECT schemaname || '.' || tablename, coalesce(rowfilter, '') FROM pg_publication_tables
		WHERE pubname = $1 AND schemaname || '.' || tablename = ANY ($2::text[])`, t.Publication, t.qualified())
	if err != nil {
		return d, fmt.Errorf("read row filters of publication %q: %w", t.Publication, err)
	}
	stored := map[string]string{}
	var name, filter string
	if _, err := pgx.ForEachRow(rows, []any{&name, &filter}, func() error { stored[name] = filter; return nil }); err != nil {
		return d, fmt.Errorf("read row filters of publication %q: %w", t.Publication, err)
	}
	for _, tb := range t.Tables {
		q := tb.Qualified()
		want, have := filters[q], stored[q]
		same := want.IsZero() && have == ""
		if !want.IsZero() && have != "" {
			if same, err = sameFilter(ctx, conn, tb, want, have); err != nil {
				return d, err
			}
		}
		if !same {
			d.tables = append(d.tables, q)
		}
	}
	if len(d.tables) > 0 {
		d.alter = fmt.Sprintf("ALTER PUBLICATION %s SET TABLE %s;", pgx.Identifier{t.Publication}.Sanitize(), publicationTables(t.qualified(), filters))
	}
	return d, nil
}

// sameFilter reports whether the server reads want and the publication's
// filter have (pg_get_expr's text) as the same expression over tb. Their
// texts differ even when they agree ('x'::text for 'x'), so both are
// deparsed the same way (deparse). A filter that does not parse differs.
func sameFilter(ctx context.Context, conn *pgx.Conn, tb decode.Table, want predicate.Expr, have string) (bool, error) {
	stored, err := predicate.Parse("the publication's row filter", have)
	if err != nil {
		return false, nil
	}
	if stored.SQL() == want.SQL() {
		return true, nil
	}
	defs, err := deparse(ctx, conn, tb, want, stored)
	if err != nil {
		return false, err
	}
	return defs[0] == defs[1], nil
}

// deparse returns each filter as the server reads it over tb: the
// definition of a temporary view of tb filtered by it, created in a
// transaction rolled back. Creating a view reads nothing, so this needs
// no privilege on tb, and it is where the server says that a filter names
// a column tb lacks or is not a boolean: an error naming --where for
// filters[0], the configured one.
func deparse(ctx context.Context, conn *pgx.Conn, tb decode.Table, filters ...predicate.Expr) ([]string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("read row filters of %s: %w", quoted(tb), err)
	}
	defer tx.Rollback(context.Background())
	for _, s := range []string{"SET LOCAL statement_timeout = '30s'", "SET LOCAL standard_conforming_strings = on"} {
		if err := execOne(ctx, tx.Conn(), s); err != nil {
			return nil, fmt.Errorf("read row filters of %s: %w", quoted(tb), err)
		}
	}
	defs := make([]string, len(filters))
	for i, f := range filters {
		view := fmt.Sprintf("outbox_cdc_filter_%d", i)
		err := execOne(ctx, tx.Conn(), "CREATE TEMP VIEW "+view+" AS SELECT * FROM "+quoted(tb)+" WHERE ("+f.SQL()+")")
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // no TEMP on the database
			return nil, fmt.Errorf("%w: comparing the publication's row filter of %s with --where takes a temporary view (created and rolled back), which the role may not create: %s; run GRANT TEMPORARY ON DATABASE … TO the role (PUBLIC has it unless revoked)",
				ErrNotReady, quoted(tb), strings.TrimSpace(pgErr.Message))
		}
		if i == 0 && errors.As(err, &pgErr) {
			return nil, fmt.Errorf("%w: --where %q on %s: %s", ErrNotReady, f, quoted(tb), strings.TrimSpace(pgErr.Message))
		}
		if err == nil {
			err = tx.QueryRow(ctx, `SELECT pg_get_viewdef(('pg_temp.' || $1)::regclass)`, view).Scan(&defs[i])
		}
		if err != nil {
			return nil, fmt.Errorf("read row filters of %s: %w", quoted(tb), err)
		}
	}
	return defs, nil
}

// execOne runs sql on the extended protocol, which carries one statement
// and no more: a statement holding a rendered --where cannot hold a
// second, whatever the rendering. (pgx's Exec without arguments uses the
// simple protocol, which runs every statement it is sent.)
func execOne(ctx context.Context, conn *pgx.Conn, sql string) error {
	_, err := conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Close()
	return err
}

// checkPublishes refuses a row filter on a publication that publishes
// more than INSERTs: PostgreSQL then requires the filter's columns to be
// in the table's REPLICA IDENTITY, or fails the writers' UPDATEs and
// DELETEs (cleanup's too). outbox-cdc's own publications publish INSERTs
// alone.
func checkPublishes(t Target, update, del bool) error {
	if !t.filtered() || !update && !del {
		return nil
	}
	return fmt.Errorf("%w: publication %q publishes UPDATEs or DELETEs, and --where makes it filter rows, with which PostgreSQL fails UPDATEs and DELETEs of rows whose filter columns are outside the REPLICA IDENTITY; run ALTER PUBLICATION %s SET (publish = 'insert'), or choose another --publication",
		ErrNotReady, t.Publication, pgx.Identifier{t.Publication}.Sanitize())
}

// filterNames lists t's filtered tables, for messages.
func (t Target) filterNames() []string {
	var out []string
	for name, w := range t.Where {
		if w != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
