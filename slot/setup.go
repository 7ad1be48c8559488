package slot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Target names what outbox-cdc replicates: one or more outbox tables
// through one publication and one slot.
type Target struct {
	Tables      []decode.Table
	Publication string
	Slot        string
	// Failover is how a new slot is created: FailoverAuto (failover-enabled
	// on PostgreSQL 17 and newer), FailoverOn or FailoverOff.
	Failover Failover
	// Where are the tables' row filters (--where) by schema.name, as
	// configured; absent or empty: every row. The publication filters by
	// them (PostgreSQL 15 and newer), so that relays on one outbox, each
	// with its own publication and slot, share its rows out. They reach
	// SQL only parsed and rendered (predicate.Parse), never as given.
	Where map[string]string
}

// quoted is a table's name as SQL wants it.
func quoted(tb decode.Table) string { return pgx.Identifier{tb.Schema, tb.Name}.Sanitize() }

// tableList is the tables as SQL lists them: "a"."b", "c"."d".
func (t Target) tableList() string {
	names := make([]string, len(t.Tables))
	for i, tb := range t.Tables {
		names[i] = quoted(tb)
	}
	return strings.Join(names, ", ")
}

// createPublication is the statement that creates t's publication, each
// table with its row filter. Without tables (events as logical decoding
// messages alone) the publication is empty: pgoutput needs one to stream,
// and sends messages whatever it holds.
func (t Target) createPublication() (string, error) {
	pub := pgx.Identifier{t.Publication}.Sanitize()
	if len(t.Tables) == 0 {
		return fmt.Sprintf("CREATE PUBLICATION %s WITH (publish = 'insert')", pub), nil
	}
	filters, err := t.filters()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')", pub, publicationTables(t.qualified(), filters)), nil
}

// describe names the tables for people.
func (t Target) describe() string {
	if len(t.Tables) == 0 {
		return "no table (messages only)"
	}
	return t.tableList()
}

// qualified is the tables' schema.name forms, as pg_publication_tables
// spells them once joined with a dot.
func (t Target) qualified() []string {
	names := make([]string, len(t.Tables))
	for i, tb := range t.Tables {
		names[i] = tb.Qualified()
	}
	return names
}

// required returns the columns a table must have: those mapped to the
// event and the header columns.
func required(c decode.Columns) []string {
	var cols []string
	for _, name := range []string{c.ID, c.AggregateType, c.AggregateID, c.EventType, c.Payload} {
		if name != "" { // an aggregate column the table does not have
			cols = append(cols, name)
		}
	}
	for _, h := range c.HeaderColumns {
		cols = append(cols, h.Column)
	}
	if c.Partition != "" {
		cols = append(cols, c.Partition)
	}
	return append(cols, c.TopicColumns...)
}

// missingFromPublication returns the tables of t that the publication does
// not carry.
func missingFromPublication(ctx context.Context, conn *pgx.Conn, t Target) ([]string, error) {
	rows, err := conn.Query(ctx, `
		SELECT q FROM unnest($2::text[]) q
		WHERE NOT EXISTS (SELECT 1 FROM pg_publication_tables p WHERE p.pubname = $1 AND p.schemaname || '.' || p.tablename = q)`,
		t.Publication, t.qualified())
	if err != nil {
		return nil, fmt.Errorf("read tables of publication %q: %w", t.Publication, err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read tables of publication %q: %w", t.Publication, err)
	}
	return missing, nil
}

// quotedList quotes schema.name forms for SQL.
func quotedList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		schema, table, _ := strings.Cut(n, ".")
		out[i] = pgx.Identifier{schema, table}.Sanitize()
	}
	return strings.Join(out, ", ")
}

// Prepare checks the server and the role, makes sure the publication and the
// slot exist in the expected shape (creating what is missing), and returns
// the slot's confirmed position: where streaming must start. conn is an
// ordinary (non-replication) connection. createSlot is false on a reconnect:
// a slot that vanished since streaming began was dropped by someone, and
// creating a new one would silently skip the events in between.
func Prepare(ctx context.Context, conn *pgx.Conn, t Target, createSlot bool) (pglogrepl.LSN, error) {
	srv, err := prepareTables(ctx, conn, t)
	if err != nil {
		return 0, err
	}
	return ensureSlot(ctx, conn, t, srv, createSlot)
}

// checkServer checks the server's version (and that it has row filters
// when t has some), wal_level and the role; it returns the version.
func checkServer(ctx context.Context, conn *pgx.Conn, t Target) (Server, error) {
	var srv Server
	var walLevel string
	var canReplicate bool
	err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('wal_level'), rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).
		Scan(&srv.Num, &walLevel, &canReplicate)
	if err != nil {
		return Server{}, fmt.Errorf("read the server version, wal_level and role attributes: %w", err)
	}
	if why := srv.Unsupported(); why != "" {
		return Server{}, fmt.Errorf("%w: %s", ErrNotReady, why)
	}
	if why := rowFilterUnsupported(srv, t); why != "" {
		return Server{}, fmt.Errorf("%w: %s", ErrNotReady, why)
	}
	if walLevel != "logical" {
		return Server{}, fmt.Errorf("%w: wal_level is %q; set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart Postgres", ErrNotReady, walLevel)
	}
	if !canReplicate {
		return Server{}, fmt.Errorf("%w: role %q lacks REPLICATION; run ALTER ROLE %s REPLICATION as a superuser", ErrNotReady, conn.Config().User, pgx.Identifier{conn.Config().User}.Sanitize())
	}
	return srv, nil
}

func checkTable(ctx context.Context, conn *pgx.Conn, tb decode.Table) error {
	rows, err := conn.Query(ctx, `
		SELECT a.attname FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, quoted(tb))
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", quoted(tb), err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", quoted(tb), err)
	}
	if len(have) == 0 {
		return fmt.Errorf("%w: table %s does not exist; create it (see sql/publication.sql) or set --table", ErrNotReady, quoted(tb))
	}
	for _, c := range required(tb.Columns) {
		found := false
		for _, h := range have {
			found = found || h == c
		}
		if !found {
			return fmt.Errorf("%w: table %s has no column %q; it has %s", ErrColumnMissing, quoted(tb), c, strings.Join(have, ", "))
		}
	}
	return nil
}

// ensurePublication creates t's publication, or checks the one in place:
// it carries t's tables, publishes INSERTs, and filters their rows as t's
// row filters say. What differs is refused, saying what to run: an
// existing publication is never altered here.
func ensurePublication(ctx context.Context, conn *pgx.Conn, t Target, srv Server) error {
	var insert, update, del bool
	err := conn.QueryRow(ctx, `SELECT pubinsert, pubupdate, pubdelete FROM pg_publication WHERE pubname = $1`, t.Publication).Scan(&insert, &update, &del)
	if errors.Is(err, pgx.ErrNoRows) {
		return createPublication(ctx, conn, t)
	}
	if err != nil {
		return fmt.Errorf("read publication %q: %w", t.Publication, err)
	}
	missing, err := missingFromPublication(ctx, conn, t)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		filters, err := t.filters()
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: publication %q exists but does not publish %s; run ALTER PUBLICATION %s ADD TABLE %s, or choose another --publication",
			ErrNotReady, t.Publication, quotedList(missing), pgx.Identifier{t.Publication}.Sanitize(), publicationTables(missing, filters))
	}
	if !insert {
		return fmt.Errorf("%w: publication %q does not publish INSERTs; run ALTER PUBLICATION %s SET (publish = 'insert'), or choose another --publication",
			ErrNotReady, t.Publication, pgx.Identifier{t.Publication}.Sanitize())
	}
	if err := checkPublishes(t, update, del); err != nil {
		return err
	}
	d, err := readDrift(ctx, conn, t, srv)
	if err != nil {
		return err
	}
	if d.alter != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, d.message(t.Publication))
	}
	return nil
}

// createPublication creates t's publication. A statement holding row
// filters runs alone on the extended protocol, with standard-conforming
// strings, as predicate.Parse read them.
func createPublication(ctx context.Context, conn *pgx.Conn, t Target) error {
	stmt, err := t.createPublication()
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("create publication %q: %w", t.Publication, err)
	}
	defer tx.Rollback(context.Background())
	if err := execOne(ctx, tx.Conn(), "SET LOCAL standard_conforming_strings = on"); err != nil {
		return fmt.Errorf("create publication %q: %w", t.Publication, err)
	}
	err = execOne(ctx, tx.Conn(), stmt)
	var pgErr *pgconn.PgError
	if t.filtered() && errors.As(err, &pgErr) && pgErr.Code != "42710" && pgErr.Code != "42501" {
		// The server's judgement of a filter (a column it lacks, a function
		// a row filter may not call): the operator's to fix.
		why := strings.TrimSpace(pgErr.Message)
		if pgErr.Detail != "" {
			why += " (" + strings.TrimSpace(pgErr.Detail) + ")"
		}
		return fmt.Errorf("%w: create publication %q with --where on %s: %s", ErrNotReady, t.Publication, strings.Join(t.filterNames(), ", "), why)
	}
	if err != nil {
		return fmt.Errorf("create publication %q: %w", t.Publication, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create publication %q: %w", t.Publication, err)
	}
	return nil
}

// ensureSlot returns t's slot's confirmed position, creating the slot when
// create allows; srv is the server's version, as Prepare read it.
func ensureSlot(ctx context.Context, conn *pgx.Conn, t Target, srv Server, create bool) (pglogrepl.LSN, error) {
	slot := t.Slot
	s, err := readSlot(ctx, conn, slot)
	if errors.Is(err, pgx.ErrNoRows) && !create {
		return 0, fmt.Errorf("%w: slot %q was dropped while outbox-cdc was streaming from it; events after its last confirmed position may be missing. "+
			"After reconciling, restart outbox-cdc to create it anew", ErrSlotInvalidated, slot)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		var failover bool
		if failover, err = wantFailover(srv, t); err != nil {
			return 0, err
		}
		if failover {
			_, err = conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)`, slot)
		} else {
			_, err = conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" {
			err = nil // created meanwhile by another instance
		}
		if err != nil {
			return 0, fmt.Errorf("create replication slot %q: %w", slot, err)
		}
		s, err = readSlot(ctx, conn, slot)
	}
	if err != nil {
		return 0, fmt.Errorf("read replication slot %q: %w", slot, err)
	}
	switch {
	case s.kind != "logical" || s.plugin != "pgoutput":
		return 0, fmt.Errorf("%w: slot %q is a %s slot with plugin %q, not a logical pgoutput slot; choose another --slot", ErrNotReady, slot, s.kind, s.plugin)
	case s.database != conn.Config().Database && conn.Config().Database != "":
		return 0, fmt.Errorf("%w: slot %q belongs to database %q, not %q; choose another --slot", ErrNotReady, slot, s.database, conn.Config().Database)
	case s.walStatus == "lost" || s.confirmed == 0:
		var current string
		_ = conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&current)
		return 0, fmt.Errorf("%w: slot %q was invalidated (wal_status %q, max_slot_wal_keep_size exceeded): the WAL from its confirmed position %s to %s was removed "+
			"before it was read, so events committed in that range were not relayed. To recover: SELECT pg_drop_replication_slot('%s'); then start outbox-cdc with "+
			"--backfill-where selecting the rows of that range (such as created_at >= the time of %s), which republishes them from the new slot's snapshot and streams what follows",
			ErrSlotInvalidated, slot, s.walStatus, s.confirmed, current, slot, s.confirmed)
	}
	return s.confirmed, nil
}

type slotRow struct {
	kind, plugin, database, walStatus string
	confirmed                         pglogrepl.LSN
}

func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotRow, error) {
	var s slotRow
	var confirmed *string
	err := conn.QueryRow(ctx, `
		SELECT slot_type, coalesce(plugin, ''), coalesce(database, ''), coalesce(wal_status, ''), confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&s.kind, &s.plugin, &s.database, &s.walStatus, &confirmed)
	if err != nil {
		return s, err
	}
	if confirmed != nil {
		if s.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return s, fmt.Errorf("parse confirmed_flush_lsn %q: %w", *confirmed, err)
		}
	}
	return s, nil
}

// SlotExists reports whether slot exists.
func SlotExists(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read replication slots: %w", err)
	}
	return ok, nil
}

// Confirmed returns slot's confirmed_flush_lsn (0 when it has none).
func Confirmed(ctx context.Context, conn *pgx.Conn, slot string) (pglogrepl.LSN, error) {
	s, err := readSlot(ctx, conn, slot)
	if err != nil {
		return 0, fmt.Errorf("read replication slot %q: %w", slot, err)
	}
	return s.confirmed, nil
}

// PrepareTables is Prepare without the slot: the server, the tables and
// the publication.
func PrepareTables(ctx context.Context, conn *pgx.Conn, t Target) error {
	_, err := prepareTables(ctx, conn, t)
	return err
}

// prepareTables is PrepareTables, returning the server's version it read,
// so that Prepare asks it once.
func prepareTables(ctx context.Context, conn *pgx.Conn, t Target) (Server, error) {
	srv, err := checkServer(ctx, conn, t)
	if err != nil {
		return Server{}, err
	}
	for _, tb := range t.Tables {
		if err := checkTable(ctx, conn, tb); err != nil {
			return Server{}, err
		}
	}
	return srv, ensurePublication(ctx, conn, t, srv)
}
