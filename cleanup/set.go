package cleanup

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Set is one COLUMN=VALUE of --mark or --mark-dead: what an UPDATE sets a
// row's column to once its event is in Kafka (or, for --mark-dead, in the
// dead-letter topic). The column is a catalog name, quoted; the value is
// bound as a parameter, or is now().
type Set struct {
	Column string
	kind   setKind
	value  any // bool, int64 or string, for setBool, setInt and setString
}

type setKind int

const (
	setNow    setKind = iota // now(): the time of the UPDATE's transaction
	setBool                  // true or false
	setInt                   // an integer
	setString                // a single-quoted string
	setReason                // the dead letter's reason (--mark-dead only)
)

// ParseSet reads COLUMN=VALUE, VALUE being now(), true, false, an integer,
// a single-quoted string (a quote inside doubled), or, when dead, reason.
func ParseSet(s string, dead bool) (Set, error) {
	col, v, ok := strings.Cut(s, "=")
	if !ok || col == "" || v == "" {
		return Set{}, fmt.Errorf("%q: want COLUMN=VALUE", s)
	}
	set := Set{Column: col}
	switch {
	case v == "now()":
		set.kind = setNow
	case v == "true" || v == "false":
		set.kind, set.value = setBool, v == "true"
	case v == "reason" && dead:
		set.kind = setReason
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		inner := v[1 : len(v)-1]
		if strings.Contains(strings.ReplaceAll(inner, "''", ""), "'") {
			return Set{}, fmt.Errorf("%q: a quote inside a string is written ''", s)
		}
		set.kind, set.value = setString, strings.ReplaceAll(inner, "''", "'")
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			want := "now(), true, false, an integer or a 'quoted string'"
			if dead {
				want += ", or reason"
			}
			return Set{}, fmt.Errorf("%q: the value %s is none of %s", s, v, want)
		}
		set.kind, set.value = setInt, n
	}
	return set, nil
}

// fits reports whether the value suits a column of Postgres type category
// cat (pg_type.typcategory) and says why not.
func (s Set) fits(cat, typ string) error {
	ok := false
	switch s.kind {
	case setNow:
		ok = cat == "D"
	case setBool:
		ok = cat == "B"
	case setInt:
		ok = cat == "N"
	case setString:
		ok = cat == "S" || cat == "U" || cat == "E"
	case setReason:
		ok = cat == "S"
	}
	if !ok {
		return fmt.Errorf("column %q is %s, which %s does not fit", s.Column, typ, s.describe())
	}
	return nil
}

func (s Set) describe() string {
	switch s.kind {
	case setNow:
		return "now()"
	case setReason:
		return "reason"
	case setString:
		return "'" + s.value.(string) + "'"
	}
	return fmt.Sprint(s.value)
}

var errNoSets = errors.New("no column to set")
