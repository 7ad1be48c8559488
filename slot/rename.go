package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// WithOIDs returns t with each table's OID as the server knows its name
// now, so that the stream follows the table by OID (decode.Table.OID) if it
// is renamed while streaming. A table that does not exist is ErrNotReady.
func WithOIDs(ctx context.Context, conn *pgx.Conn, t Target) (Target, error) {
	t.Tables = slices.Clone(t.Tables)
	for i, tb := range t.Tables {
		var oid *uint32
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1)::oid`, quoted(tb)).Scan(&oid); err != nil {
			return t, fmt.Errorf("look up outbox table %s: %w", quoted(tb), err)
		}
		if oid == nil {
			return t, fmt.Errorf("%w: outbox table %s does not exist (renamed? then name it anew in --table or the config file)", ErrNotReady, quoted(tb))
		}
		t.Tables[i].OID = *oid
	}
	return t, nil
}

// renamed returns, for each table of t with a known OID that is now called
// otherwise, its old and new names.
func renamed(ctx context.Context, conn *pgx.Conn, t Target) ([][2]string, error) {
	var out [][2]string
	for _, tb := range t.Tables {
		if tb.OID == 0 {
			continue
		}
		var schema, name string
		err := conn.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.oid = $1`, tb.OID).Scan(&schema, &name)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // dropped
		}
		if err != nil {
			return nil, fmt.Errorf("look up table %d: %w", tb.OID, err)
		}
		if schema != tb.Schema || name != tb.Name {
			out = append(out, [2]string{quoted(tb), pgx.Identifier{schema, name}.Sanitize()})
		}
	}
	return out, nil
}
