package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// Check inspects, without changing anything, whether Postgres is ready for
// `outbox-cdc run` with t and columns, as the role of url, and what could
// cost the slot and what losing it would cost with o. Each item carries the
// fix for what is wrong.
func Check(ctx context.Context, url string, t Target, o CheckOptions) []checklist.Item {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return []checklist.Item{{Name: "postgres reachable", Status: checklist.Fail, Detail: checklist.OneLine(err),
			Fix: "check --postgres-url: host, port, database, user, password and sslmode"}}
	}
	defer conn.Close(context.Background())
	c := &checker{ctx: ctx, conn: conn, t: t, o: o, user: conn.Config().User}
	var version string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int`).Scan(&version, &c.srv.Num); err != nil {
		return []checklist.Item{{Name: "postgres reachable", Status: checklist.Fail, Detail: checklist.OneLine(err)}}
	}
	c.add(checklist.OK, "postgres reachable", fmt.Sprintf("PostgreSQL %s, role %s, database %s", version, c.user, conn.Config().Database), "")
	c.server()
	if t.filtered() {
		c.rowFilters()
	}
	all := true
	for _, tb := range t.Tables {
		all = c.table(tb) && all
	}
	if all {
		c.publication()
	}
	c.slot()
	return c.items
}

type checker struct {
	ctx   context.Context
	conn  *pgx.Conn
	t     Target
	o     CheckOptions
	user  string
	super bool
	srv   Server // read with "postgres reachable"
	items []checklist.Item
}

func (c *checker) add(s checklist.Status, name, detail, fix string) {
	c.items = append(c.items, checklist.Item{Name: name, Status: s, Detail: detail, Fix: fix})
}

func (c *checker) failed(name string, err error) {
	c.add(checklist.Fail, name, "could not read: "+checklist.OneLine(err), "")
}

func (c *checker) server() {
	var walLevel string
	var maxSenders, senders, maxSlots, slots int
	var canReplicate, emit bool
	var emitSig string // its signature: PostgreSQL 17 added a fourth argument
	err := c.conn.QueryRow(c.ctx, `
		SELECT current_setting('wal_level'),
			current_setting('max_wal_senders')::int, (SELECT count(*) FROM pg_stat_replication)::int,
			current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_replication_slots)::int,
			r.rolreplication OR r.rolsuper, r.rolsuper,
			coalesce((SELECT bool_or(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_proc p
				WHERE p.proname = 'pg_logical_emit_message' AND p.proargtypes[2] = 'text'::regtype), false),
			(SELECT coalesce(min(p.oid::regprocedure::text), 'pg_logical_emit_message(boolean, text, text)') FROM pg_proc p
				WHERE p.proname = 'pg_logical_emit_message' AND p.proargtypes[2] = 'text'::regtype)
		FROM pg_roles r WHERE r.rolname = current_user`).
		Scan(&walLevel, &maxSenders, &senders, &maxSlots, &slots, &canReplicate, &c.super, &emit, &emitSig)
	if err != nil {
		c.failed("server settings", err)
		return
	}
	if walLevel == "logical" {
		c.add(checklist.OK, "wal_level", "logical", "")
	} else {
		c.add(checklist.Fail, "wal_level", fmt.Sprintf("%s, want logical", walLevel),
			"ALTER SYSTEM SET wal_level = logical; then restart Postgres (on a managed service: its logical replication setting)")
	}
	switch {
	case maxSenders == 0:
		c.add(checklist.Fail, "max_wal_senders", "0", "ALTER SYSTEM SET max_wal_senders = 10; then restart Postgres")
	case senders >= maxSenders:
		c.add(checklist.Fail, "max_wal_senders", fmt.Sprintf("all %d in use", maxSenders), "raise max_wal_senders (restart needed), or stop an unused replication client")
	default:
		c.add(checklist.OK, "max_wal_senders", fmt.Sprintf("%d, %d in use", maxSenders, senders), "")
	}
	var exists bool
	_ = c.conn.QueryRow(c.ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, c.t.Slot).Scan(&exists)
	switch {
	case !exists && slots >= maxSlots:
		c.add(checklist.Fail, "max_replication_slots", fmt.Sprintf("all %d in use, and slot %q does not exist yet", maxSlots, c.t.Slot),
			"raise max_replication_slots (restart needed), or drop an unused slot: SELECT pg_drop_replication_slot('name')")
	default:
		c.add(checklist.OK, "max_replication_slots", fmt.Sprintf("%d, %d in use", maxSlots, slots), "")
	}
	if canReplicate {
		c.add(checklist.OK, "role may replicate", fmt.Sprintf("%s has REPLICATION", c.user), "")
	} else {
		c.add(checklist.Fail, "role may replicate", fmt.Sprintf("%s lacks REPLICATION", c.user),
			fmt.Sprintf("as a superuser: ALTER ROLE %s REPLICATION;", pgx.Identifier{c.user}.Sanitize()))
	}
	if emit {
		c.add(checklist.OK, "heartbeats", "role may call pg_logical_emit_message", "")
	} else {
		c.add(checklist.Warn, "heartbeats", "role may not call pg_logical_emit_message: an idle outbox advances its slot only on keepalives",
			fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s;", emitSig, pgx.Identifier{c.user}.Sanitize()))
	}
}

// table checks the outbox table and its columns; it reports whether the
// table exists.
func (c *checker) table(tb decode.Table) bool {
	name := quoted(tb)
	rows, err := c.conn.Query(c.ctx, `
		SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, name)
	if err != nil {
		c.failed("outbox table "+tb.Qualified(), err)
		return false
	}
	types := map[string]string{}
	var col, typ string
	_, err = pgx.ForEachRow(rows, []any{&col, &typ}, func() error { types[col] = typ; return nil })
	if err != nil {
		c.failed("outbox table "+tb.Qualified(), err)
		return false
	}
	if len(types) == 0 {
		c.add(checklist.Fail, "outbox table "+tb.Qualified(), fmt.Sprintf("%s does not exist", name),
			"create it (sql/publication.sql has the reference DDL), or point --table at yours")
		return false
	}
	var canSelect bool
	_ = c.conn.QueryRow(c.ctx, `SELECT has_table_privilege(current_user, $1, 'SELECT')`, name).Scan(&canSelect)
	// Streaming reads the table's rows from the WAL: pgoutput does not
	// check SELECT, so its absence is no failure (measured on PG 15).
	if canSelect {
		c.add(checklist.OK, "outbox table "+tb.Qualified(), fmt.Sprintf("%s exists; %s may SELECT it", name, c.user), "")
	} else {
		c.add(checklist.OK, "outbox table "+tb.Qualified(), fmt.Sprintf("%s exists; %s may not SELECT it, which streaming does not need", name, c.user), "")
	}

	var bad, found []string
	fix := ""
	for _, col := range columnRoles(tb.Columns) {
		typ, ok := types[col.name]
		switch {
		case !ok && col.optional:
			found = append(found, fmt.Sprintf("%s absent (optional, unused)", col.flag))
		case !ok:
			have := make([]string, 0, len(types))
			for n := range types {
				have = append(have, n)
			}
			slices.Sort(have)
			bad = append(bad, fmt.Sprintf("no column %q for --%s", col.name, col.flag))
			fix = fmt.Sprintf("set the --column-* flags to the table's columns (it has %s)", strings.Join(have, ", "))
		case len(col.types) > 0 && !slices.Contains(col.types, typ):
			bad = append(bad, fmt.Sprintf("%s is %s, want %s", col.name, typ, strings.Join(col.types, " or ")))
			if fix == "" {
				fix = "change the column's type, or map another column"
			}
		default:
			found = append(found, col.name+" "+typ)
		}
	}
	if len(bad) > 0 {
		c.add(checklist.Fail, "outbox columns of "+tb.Qualified(), strings.Join(bad, "; "), fix)
	} else {
		c.add(checklist.OK, "outbox columns of "+tb.Qualified(), strings.Join(found, ", "), "")
	}
	return true
}

type columnRole struct {
	flag, name string
	optional   bool
	types      []string // accepted format_type() names; empty: any
}

func columnRoles(c decode.Columns) []columnRole {
	roles := []columnRole{{flag: "column-id", name: c.ID}}
	if c.AggregateType != "" { // empty: the table has none
		roles = append(roles, columnRole{flag: "column-aggregate-type", name: c.AggregateType})
	}
	if c.AggregateID != "" {
		roles = append(roles, columnRole{flag: "column-aggregate-id", name: c.AggregateID})
	}
	roles = append(roles, []columnRole{
		{flag: "column-event-type", name: c.EventType},
		{flag: "column-payload", name: c.Payload, types: []string{"jsonb", "json", "text", "bytea", "character varying"}},
		{flag: "column-headers", name: c.Headers, optional: true, types: []string{"jsonb", "json"}},
		{flag: "column-timestamp", name: c.Timestamp, optional: true, types: []string{"timestamp with time zone", "timestamp without time zone"}},
	}...)
	for _, h := range c.HeaderColumns {
		roles = append(roles, columnRole{flag: "header-column", name: h.Column})
	}
	for _, name := range c.TopicColumns {
		roles = append(roles, columnRole{flag: "topic", name: name})
	}
	if c.Partition != "" {
		roles = append(roles, columnRole{flag: "column-partition", name: c.Partition}) // any type whose text is an integer
	}
	return roles
}

func (c *checker) publication() {
	name := c.t.Publication
	var insert, mine bool
	var owner string
	err := c.conn.QueryRow(c.ctx, `
		SELECT p.pubinsert, pg_get_userbyid(p.pubowner), p.pubowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
		FROM pg_publication p WHERE p.pubname = $1`, name).Scan(&insert, &owner, &mine)
	if errors.Is(err, pgx.ErrNoRows) {
		mayCreate := c.super
		if !mayCreate {
			_ = c.conn.QueryRow(c.ctx, `
				SELECT has_database_privilege(current_database(), 'CREATE') AND coalesce(bool_and(pg_has_role(current_user, c.relowner, 'USAGE')), true)
				FROM pg_class c WHERE c.oid = ANY (SELECT to_regclass(q) FROM unnest($1::text[]) q)`, c.t.qualified()).Scan(&mayCreate)
		}
		if mayCreate {
			c.add(checklist.OK, "publication", fmt.Sprintf("%q does not exist yet; run will create it", name), "")
		} else {
			c.add(checklist.Fail, "publication", fmt.Sprintf("%q does not exist, and %s may not create it (it needs to own %s and have CREATE on the database)", name, c.user, c.t.describe()),
				"as the tables' owner: outbox-cdc setup --role "+c.user+" (or outbox-cdc setup --print for the SQL)")
		}
		return
	}
	if err != nil {
		c.failed("publication", err)
		return
	}
	missing, err := missingFromPublication(c.ctx, c.conn, c.t)
	if err != nil {
		c.failed("publication", err)
		return
	}
	switch {
	case len(missing) > 0:
		who := "as its owner " + owner
		if mine {
			who = "as " + c.user
		}
		c.add(checklist.Fail, "publication", fmt.Sprintf("%q exists without %s", name, quotedList(missing)),
			fmt.Sprintf("%s: ALTER PUBLICATION %s ADD TABLE %s;", who, pgx.Identifier{name}.Sanitize(), quotedList(missing)))
	case !insert:
		c.add(checklist.Fail, "publication", fmt.Sprintf("%q does not publish INSERTs", name),
			fmt.Sprintf("as its owner %s: ALTER PUBLICATION %s SET (publish = 'insert');", owner, pgx.Identifier{name}.Sanitize()))
	default:
		c.publicationFilters(owner)
	}
}

// rowFilters checks that t's row filters (--where) parse and that the
// server has publication row filters.
func (c *checker) rowFilters() {
	filters, err := c.t.filters()
	switch {
	case err != nil:
		c.add(checklist.Fail, "row filter", checklist.OneLine(err), "write --where as one boolean expression over the table's own columns")
	case rowFilterUnsupported(c.srv, c.t) != "":
		c.add(checklist.Fail, "row filter", rowFilterUnsupported(c.srv, c.t), "upgrade PostgreSQL to 15 or newer, or remove --where")
	default:
		var parts []string
		for _, tb := range c.t.Tables {
			f, ok := filters[tb.Qualified()]
			if !ok {
				continue
			}
			if _, err := deparse(c.ctx, c.conn, tb, f); err != nil {
				c.add(checklist.Fail, "row filter", checklist.OneLine(err), "write --where over the table's own columns, as a boolean")
				return
			}
			parts = append(parts, fmt.Sprintf("%s WHERE (%s)", tb.Qualified(), f.SQL()))
		}
		c.add(checklist.OK, "row filter", "publication row filter: "+strings.Join(parts, ", "), "")
	}
}

// publicationFilters finishes the check of a publication that carries
// t's tables and publishes INSERTs: its row filters must be t's.
func (c *checker) publicationFilters(owner string) {
	name := c.t.Publication
	var update, del bool
	err := c.conn.QueryRow(c.ctx, `SELECT pubupdate, pubdelete FROM pg_publication WHERE pubname = $1`, name).Scan(&update, &del)
	if err == nil {
		err = checkPublishes(c.t, update, del)
	}
	var d filterDrift
	if err == nil {
		d, err = readDrift(c.ctx, c.conn, c.t, c.srv)
	}
	switch {
	case errors.Is(err, ErrNotReady):
		c.add(checklist.Fail, "publication", checklist.OneLine(err), "")
	case err != nil:
		c.failed("publication", err)
	case d.alter != "":
		c.add(checklist.Fail, "publication", fmt.Sprintf("%q filters the rows of %s otherwise than --where says", name, quotedList(d.tables)),
			fmt.Sprintf("as its owner %s: %s", owner, d.alter))
	case c.t.filtered():
		c.add(checklist.OK, "publication", fmt.Sprintf("%q publishes INSERTs of %s, filtered as --where says (owner %s)", name, c.t.describe(), owner), "")
	default:
		c.add(checklist.OK, "publication", fmt.Sprintf("%q publishes INSERTs of %s (owner %s)", name, c.t.describe(), owner), "")
	}
}

// slot checks the slot, then what may cost it and what losing it costs.
func (c *checker) slot() {
	r, rerr := readRisk(c.ctx, c.conn, c.t.Slot)
	st, err := ReadSlotState(c.ctx, c.conn, c.t)
	switch {
	case errors.Is(err, ErrNoSlot):
		c.add(checklist.OK, "replication slot", fmt.Sprintf("%q does not exist yet; run will create it (plugin pgoutput)", c.t.Slot), "")
	case err != nil:
		c.failed("replication slot", err)
	default:
		c.slotState(&st, r.reason)
		r.slot = &st
	}
	if rerr != nil {
		c.failed("slot limits", rerr)
		return
	}
	c.items = append(c.items, keepItem(r, c.o))
	if it, ok := idleItem(r, c.o); ok {
		c.items = append(c.items, it)
	}
	c.items = append(c.items, lostItem(r, c.o))
}

// slotState checks the slot that exists; reason is its
// invalidation_reason, if any.
func (c *checker) slotState(st *SlotState, reason string) {
	db := c.conn.Config().Database
	switch {
	case st.Plugin != "pgoutput":
		c.add(checklist.Fail, "replication slot", fmt.Sprintf("%q uses plugin %q", c.t.Slot, st.Plugin), "choose another --slot")
	case db != "" && st.Database != db:
		c.add(checklist.Fail, "replication slot", fmt.Sprintf("%q belongs to database %q", c.t.Slot, st.Database), "choose another --slot, or connect to "+st.Database)
	case st.WALStatus == "lost":
		c.items = append(c.items, lostSlotItem(c.t.Slot, reason, c.o))
	case st.WALStatus == "unreserved":
		c.add(checklist.Warn, "replication slot", fmt.Sprintf("%q is about to lose WAL (wal_status unreserved, %d bytes behind)", c.t.Slot, st.LagBytes),
			"start outbox-cdc run now, or raise max_slot_wal_keep_size")
	default:
		active := "no consumer"
		if st.Active {
			active = "streamed by pid " + fmt.Sprint(st.ActivePID)
		}
		c.add(checklist.OK, "replication slot", fmt.Sprintf("%q at %s, %d bytes behind, wal_status %s, %s", c.t.Slot, st.Confirmed, st.LagBytes, st.WALStatus, active), "")
	}
	c.failover(st)
}

// failover reports whether the slot survives a failover to a standby.
func (c *checker) failover(st *SlotState) {
	warnings, err := SlotWarnings(c.ctx, c.conn, c.t)
	switch {
	case err != nil:
		c.failed("slot failover", err)
	case len(warnings) > 0:
		c.add(checklist.Warn, "slot failover", warnings[0], failoverHint(st.Server()))
	case st.Failover && st.Synced:
		c.add(checklist.OK, "slot failover", fmt.Sprintf("%q is failover-enabled, and this server's copy is synchronized from the primary", c.t.Slot), "")
	case st.Failover:
		c.add(checklist.OK, "slot failover", fmt.Sprintf("%q is failover-enabled: standbys with sync_replication_slots=on keep a copy (%d streaming now)", c.t.Slot, st.Standbys), "")
	default:
		c.add(checklist.OK, "slot failover", fmt.Sprintf("%q is not failover-enabled (%s); no standby streams from this server", c.t.Slot, failoverHint(st.Server())), "")
	}
}
