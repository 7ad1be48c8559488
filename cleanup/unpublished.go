package cleanup

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Unpublished is the predicate, over t's own columns, that selects the
// rows the cleanup has not settled yet: what a heal of a lost slot
// (--on-slot-lost heal) publishes again. Under DeleteAfterPublish it is
// every row ("true": a published row is gone); under Mark, the rows that
// do not carry every --mark value, nor (with --mark-dead) every --mark-dead
// value, since a dead-lettered and marked row was settled too.
//
// A column is compared with IS NOT DISTINCT FROM, never =, so that a NULL
// (the usual state of a row not yet marked) selects the row rather than
// hiding it; a now() or reason mark, whose value no predicate can know, is
// read as IS NOT NULL: such a column must be NULL until the mark sets it.
// Names are quoted and values rendered as constants; the text is meant for
// the backfill's checked predicate (backfill.CheckPredicate), never for SQL
// directly.
func Unpublished(policy Policy, t Table) (string, error) {
	switch policy {
	case DeleteAfterPublish:
		return "true", nil
	case Mark:
		if len(t.Mark) == 0 {
			return "", fmt.Errorf("%s: --cleanup=mark without --mark marks only dead letters, so nothing in the table says which rows were published; "+
				"set --mark COLUMN=VALUE", t.Qualified())
		}
		where := "NOT (" + marked(t.Mark) + ")"
		if len(t.MarkDead) > 0 {
			where += " AND NOT (" + marked(t.MarkDead) + ")"
		}
		return where, nil
	}
	return "", fmt.Errorf("%s: with --cleanup %s nothing in the table says which rows were published", t.Qualified(), policy)
}

// marked is the condition that a row carries every value of sets.
func marked(sets []Set) string {
	terms := make([]string, len(sets))
	for i, s := range sets {
		col := pgx.Identifier{s.Column}.Sanitize()
		switch s.kind {
		case setNow, setReason:
			terms[i] = col + " IS NOT NULL"
		default:
			terms[i] = col + " IS NOT DISTINCT FROM " + s.constant()
		}
	}
	return strings.Join(terms, " AND ")
}

// constant is a bool, int or string value as an SQL constant.
func (s Set) constant() string {
	switch v := s.value.(type) {
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return "NULL" // not reached: ParseSet gives these kinds only
}
