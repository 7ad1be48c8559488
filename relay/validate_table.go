package relay

import (
	"slices"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/configerr"
	"github.com/outbox-cdc/outbox-cdc/internal/predicate"
)

// A table's own settings, validated as Table's fields: Config's checks
// make them Tables[i]'s (configerr.In).

// validate checks one table's mapping, route, marks and row filter.
func (t Table) validate() error {
	q := t.Qualified()
	if t.Route.Topic == "" {
		return bad("Route.Topic", "{Route.Topic} (table %s) must not be empty", q)
	}
	for _, m := range [][]cleanup.Set{t.Mark, t.MarkDead} {
		if i := slices.IndexFunc(m, func(s cleanup.Set) bool { return s.Column == "" }); i >= 0 {
			return bad("Mark", "{Mark} and {MarkDead} (table %s): a value set on no column; parse them with cleanup.ParseSet", q)
		}
	}
	if err := t.Route.validate("table " + q); err != nil {
		return configerr.In("Route", err)
	}
	cols := t.Columns
	switch np := cols.NullPayload; {
	case cols.ID == "":
		return bad("Columns.ID", "{Columns.ID} must name a column (table %s)", q)
	case cols.EventType == "":
		return bad("Columns.EventType", "{Columns.EventType} must name a column (table %s)", q)
	case cols.Payload == "":
		return bad("Columns.Payload", "{Columns.Payload} must name a column (table %s)", q)
	case np != "" && np != decode.NullPayloadDeadLetter && np != decode.NullPayloadTombstone:
		return bad("Columns.NullPayload", "{Columns.NullPayload} %q (table %s): want dead-letter or tombstone", np, q)
	case np == decode.NullPayloadTombstone && cols.AggregateID == "":
		return bad("Columns.NullPayload", "{Columns.NullPayload=tombstone} (table %s): the table has no key column ({Columns.AggregateID}), and a tombstone without a key deletes nothing", q)
	}
	if err := t.validateHeaders(); err != nil {
		return err
	}
	if t.Where != "" {
		if _, err := predicate.Parse(settingMark, t.Where); err != nil {
			return badPredicate("Where", q, err)
		}
	}
	return nil
}

// validateHeaders checks the table's header columns.
func (t Table) validateHeaders() error {
	q := t.Qualified()
	names := map[string]bool{}
	for _, h := range t.Columns.HeaderColumns {
		n := h.Name()
		switch {
		case h.Column == "":
			return bad("Columns.HeaderColumns", "{Columns.HeaderColumns} %q: want COLUMN or COLUMN:HEADER (table %s)", ":"+h.Header, q)
		case slices.Contains(reservedHeaderNames, n) || strings.HasPrefix(n, "ce_") || strings.HasPrefix(n, "outbox_cdc."):
			return bad("Columns.HeaderColumns", "{Columns.HeaderColumns} %s: header %q is set by outbox-cdc itself; name it COLUMN:OTHER", h.Column, n)
		case names[n]:
			return bad("Columns.HeaderColumns", "{Columns.HeaderColumns}: header %q is given twice (table %s)", n, q)
		}
		names[n] = true
	}
	return nil
}

// settingMark stands for the setting in a predicate parser's message
// (predicate.Parse writes the name it is given): badPredicate puts the
// setting's reference in its place.
const settingMark = "\x00"

// badPredicate is the error of field, whose predicate err refuses, for
// the table q.
func badPredicate(field, q string, err error) error {
	parts := strings.Split(err.Error(), settingMark)
	if len(parts) == 1 {
		return bad(field, "%s: {"+field+"}: %s", q, parts[0])
	}
	format, args := "%s: %s", []any{q, parts[0]}
	for _, p := range parts[1:] {
		format += "{" + field + "}%s"
		args = append(args, p)
	}
	return bad(field, format, args...)
}

// validateBackfill checks the table's backfill, when it has one.
func (t Table) validateBackfill() error {
	if t.Backfill.Where == "" {
		return nil
	}
	if _, err := backfill.ParseOrder(string(t.Backfill.Order)); err != nil {
		return bad("Backfill.Order", "{Backfill.Order} %q (table %s): want one of %s", t.Backfill.Order, t.Qualified(), orders())
	}
	// As backfill.ParsePredicate parses it, naming the setting as a field.
	if _, err := predicate.ParseRestricted(settingMark, t.Backfill.Where); err != nil {
		return badPredicate("Backfill.Where", t.Qualified(), err)
	}
	return nil
}

// orders are backfill.Orders, for messages.
func orders() string {
	s := make([]string, len(backfill.Orders))
	for i, o := range backfill.Orders {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}
