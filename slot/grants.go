package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SetupSQL returns the statements that make Postgres ready for `outbox-cdc
// run` as role (empty: no grants): the publication, the slot, and what a
// least-privilege role needs; with backfill, not the slot, which run creates
// exporting its snapshot. With conn, statements already in effect are
// left out; with a nil conn, every statement is returned, for a fresh
// database. The slot comes last: creating it cannot share a transaction
// with writes.
//
// privileges are what role needs on the tables beyond streaming: DELETE
// (--cleanup=delete-after-publish), UPDATE (mark), SELECT (backfill).
// With backfill the slot is left to run, which creates it exporting the
// snapshot the backfill reads (the progress table's SQL is
// backfill.SetupSQL's).
func SetupSQL(ctx context.Context, conn *pgx.Conn, t Target, role string, privileges []string, backfill bool) ([]string, error) {
	have := setupState{missing: t.qualified(), emitSig: emitMessageSig}
	if conn != nil {
		var err error
		if have, err = readSetupState(ctx, conn, t, role); err != nil {
			return nil, err
		}
	}
	filters, err := t.filters()
	if err != nil {
		return nil, err
	}
	var out []string
	switch {
	case !have.publication:
		create, err := t.createPublication()
		if err != nil {
			return nil, err
		}
		out = append(out, create+";")
	case len(have.missing) > 0:
		out = append(out, fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s;", pgx.Identifier{t.Publication}.Sanitize(), publicationTables(have.missing, filters)))
	case have.drift.alter != "":
		out = append(out, have.drift.alter)
	}
	if role != "" {
		out = append(out, t.grants(role, privileges, conn == nil, have)...)
	}
	// With a backfill, run creates the slot itself, exporting the snapshot
	// the backfill reads: a slot created here would leave the rows committed
	// before it to no one.
	if !have.slot && !backfill {
		failover := false
		if conn != nil {
			var err error
			if failover, err = wantFailover(have.server, t); err != nil {
				return nil, err
			}
		}
		if failover {
			out = append(out, fmt.Sprintf("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, false, true); -- failover-enabled", quoteLiteral(t.Slot)))
		} else {
			out = append(out, fmt.Sprintf("SELECT pg_create_logical_replication_slot(%s, 'pgoutput');", quoteLiteral(t.Slot)))
		}
	}
	return out, nil
}

// emitMessageSig is pg_logical_emit_message's signature before PostgreSQL
// 17, which added a flush argument: what a fresh database's SQL grants.
const emitMessageSig = "pg_logical_emit_message(boolean, text, text)"

// setupState is what SetupSQL finds in place on a server.
type setupState struct {
	publication, slot    bool        // the publication and the slot exist
	missing              []string    // tables the publication lacks, schema.name
	drift                filterDrift // row filters that differ from t's
	canLogin, canReplica bool        // the role's attributes
	emitSig              string      // pg_logical_emit_message's signature on this server
	server               Server      // read once, for the row filters and the slot's failover
}

// readSetupState reads what is in place for t and role (empty: no role is
// read). A role that does not exist is ErrNotReady: setup creates no role.
func readSetupState(ctx context.Context, conn *pgx.Conn, t Target, role string) (setupState, error) {
	s := setupState{emitSig: emitMessageSig}
	err := conn.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
			EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $2)`,
		t.Publication, t.Slot).Scan(&s.publication, &s.slot)
	if err != nil {
		return s, fmt.Errorf("read publication and slot: %w", err)
	}
	if s.missing, err = missingFromPublication(ctx, conn, t); err != nil {
		return s, err
	}
	if s.server, err = ReadServer(ctx, conn); err != nil {
		return s, fmt.Errorf("read the server version: %w", err)
	}
	if why := rowFilterUnsupported(s.server, t); why != "" {
		return s, fmt.Errorf("%w: %s", ErrNotReady, why)
	}
	if s.publication && len(s.missing) == 0 {
		if s.drift, err = readDrift(ctx, conn, t, s.server); err != nil {
			return s, err
		}
	}
	if role == "" {
		return s, nil
	}
	err = conn.QueryRow(ctx, `SELECT rolcanlogin, rolreplication OR rolsuper FROM pg_roles WHERE rolname = $1`, role).Scan(&s.canLogin, &s.canReplica)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("%w: role %q does not exist; create it first: CREATE ROLE %s WITH LOGIN REPLICATION PASSWORD '…'; then run setup again",
			ErrNotReady, role, pgx.Identifier{role}.Sanitize())
	}
	if err != nil {
		return s, fmt.Errorf("read role %q: %w", role, err)
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(min(p.oid::regprocedure::text), $1) FROM pg_proc p
		WHERE p.proname = 'pg_logical_emit_message' AND p.proargtypes[2] = 'text'::regtype`, emitMessageSig).Scan(&s.emitSig)
	if err != nil {
		return s, fmt.Errorf("read the signature of pg_logical_emit_message: %w", err)
	}
	return s, nil
}

// grants are the statements that let role stream t: LOGIN and REPLICATION
// (fresh: with a comment on creating the role), USAGE on the schemas,
// EXECUTE on pg_logical_emit_message (heartbeats), and privileges on the
// tables.
func (t Target) grants(role string, privileges []string, fresh bool, have setupState) []string {
	var out []string
	r := pgx.Identifier{role}.Sanitize()
	if fresh {
		out = append(out, fmt.Sprintf("-- the role, if it does not exist yet: CREATE ROLE %s WITH LOGIN REPLICATION PASSWORD '…';", r))
	}
	if fresh || !have.canLogin || !have.canReplica {
		out = append(out, fmt.Sprintf("ALTER ROLE %s WITH LOGIN REPLICATION;", r))
	}
	// GRANT is idempotent: repeating one costs nothing. No SELECT on the
	// table: the rows arrive through the WAL, and pgoutput does not check
	// it. USAGE lets the startup check find the table's columns.
	var schemas []string
	for _, tb := range t.Tables {
		if !slices.Contains(schemas, tb.Schema) {
			schemas = append(schemas, tb.Schema)
			out = append(out, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", pgx.Identifier{tb.Schema}.Sanitize(), r))
		}
	}
	out = append(out, fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s;", have.emitSig, r))
	if len(privileges) > 0 && len(t.Tables) > 0 { // cleaning finds rows by id: SELECT too
		privs := append([]string{"SELECT"}, slices.DeleteFunc(slices.Clone(privileges), func(p string) bool { return p == "SELECT" })...)
		out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s;", strings.Join(privs, ", "), t.tableList(), r))
	}
	return out
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
