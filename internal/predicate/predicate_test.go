package predicate

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		where string
		err   string // "" accepted
		funcs []string
	}{
		{where: "status <> 'Published'"},
		{where: "processed_on_utc IS NULL AND created_at < now()", funcs: []string{"now"}},
		{where: `"select" = 'x;y' AND note <> $$a);b$$`},
		{where: `note <> E'it\'s ) ; --' AND x = 1`},
		{where: "note <> 'it''s' /* a ; comment ( */ AND y IS NULL -- trailing ;"},
		{where: "extract(year FROM created_at) > 2020", funcs: []string{"extract"}},
		{where: "pg_catalog.lower(status) = 'x'", funcs: []string{"lower"}},
		{where: `"MyFunc"(x)`, funcs: []string{"MyFunc"}},
		{where: "true); COMMIT; CREATE TABLE pwned(x int); SELECT (1", err: "closes what it did not open"},
		{where: "true; COMMIT", err: "semicolon"},
		{where: "1=1) UNION SELECT * FROM other WHERE (true", err: "closes what it did not open"},
		{where: "id IN (SELECT id FROM other)", err: `"SELECT"`},
		{where: "id IN (TABLE other)", err: `"TABLE"`},
		{where: "EXISTS (VALUES (1))", err: `"VALUES"`},
		{where: "x = $1", err: "parameter $1"},
		{where: "(x = 1", err: "unbalanced"},
		{where: "x = 'unterminated", err: "unterminated"},
		{where: `x = E'\'`, err: "unterminated"},
		{where: "x = $tag$ never closed", err: "unterminated"},
		{where: "/* /* nested */ still a comment ; ", err: "unterminated comment"},
		{where: "   ", err: "empty"},
		{where: "t::timestamp with time zone > now() AND t::time(3) with time zone IS NULL"},
		{where: "t::timestamp(3) with time zone > timestamp with time zone '2024-01-01'"},
		{where: "t::text with time zone IS NULL", err: `"WITH"`},
		{where: "timestamp with ordinality", err: `"WITH"`},
		{where: "timestamp with time", err: `"WITH"`},
		{where: "with time zone", err: `"WITH"`},
		{where: "f(3) with time zone", err: `"WITH"`},
		{where: `U&"d\0061t\+000061" = 1`},
	} {
		p, err := Parse("--backfill-where", tc.where)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tc.where, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.where, err, tc.err)
		case tc.err == "" && tc.funcs != nil && !equalStrings(p.funcs, tc.funcs):
			t.Errorf("%q: functions %q, want %q", tc.where, p.funcs, tc.funcs)
		}
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// TestSQL: what reaches SQL is the tokens Parse judged, one space apart:
// comments and line breaks are gone (a trailing line comment can no longer
// swallow the closing parenthesis around it), quoted text is kept byte for
// byte, and every injection attempt is refused, not rendered.
func TestSQL(t *testing.T) {
	for _, tc := range []struct {
		where, sql, err string // err "": accepted, rendered as sql
	}{
		{where: "target_broker = 'partner'", sql: "target_broker = 'partner'"},
		{where: "Target_Broker='partner'", sql: "Target_Broker = 'partner'"},
		{where: "target_broker = 'partner' -- the partner's cluster", sql: "target_broker = 'partner'"},
		{where: "target_broker /* ; ) */ = 'partner'\n AND x", sql: "target_broker = 'partner' AND x"},
		{where: `"Target Broker" <> 'a;b--c' AND note = $$)x$$`, sql: `"Target Broker" <> 'a;b--c' AND note = $$)x$$`},
		{where: `note = E'it\'s'`, sql: `note = E'it\'s'`},
		{where: "n<-1 AND m::text IN ('a','b')", sql: "n <- 1 AND m :: text IN ( 'a' , 'b' )"},
		{where: "lower(target_broker) = 'partner'", sql: "lower ( target_broker ) = 'partner'"},
		{where: `x = '\'') ; DROP TABLE t ; --'`, err: "backslash"}, // standard_conforming_strings off would end the string at \'
		{where: `x = 'a\b'`, err: "backslash"},
		{where: `"a\b" = 'x'`, sql: `"a\b" = 'x'`},
		{where: "1=1); DROP TABLE x; --", err: "closes what it did not open"},
		{where: "1=1; DROP TABLE x; --", err: "semicolon"},
		{where: "true; DROP TABLE x", err: "semicolon"},
		{where: "x = 1 /* ; */ ; DROP TABLE x", err: "semicolon"},
		{where: "x = 1 --\n; DROP TABLE x", err: "semicolon"},
		{where: "x = 1 /* unterminated ; DROP TABLE x", err: "unterminated comment"},
		{where: "x IN (SELECT id FROM secrets)", err: `"SELECT"`},
		{where: "EXISTS (SELECT 1)", err: `"SELECT"`},
		{where: "x = 1) UNION (SELECT 1", err: "closes what it did not open"},
		{where: "x = 1 RETURNING *", err: `"RETURNING"`},
		{where: "x = 'a' || $1", err: "parameter $1"},
		{where: "x = $q$ unterminated", err: "unterminated"},
		{where: "x = 'it''s' OR '1'='1", err: "unterminated"},
		{where: "x = \x00", err: "unexpected character"},
	} {
		e, err := Parse("--where", tc.where)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tc.where, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "--where ")):
			t.Errorf("%q: error %v, want one beginning --where and saying %q", tc.where, err, tc.err)
		case tc.err == "" && e.SQL() != tc.sql:
			t.Errorf("%q: rendered %q, want %q", tc.where, e.SQL(), tc.sql)
		case tc.err == "" && e.String() != tc.where:
			t.Errorf("%q: String %q, want the expression as given", tc.where, e.String())
		}
	}
	if !(Expr{}).IsZero() {
		t.Error("the zero Expr is not IsZero")
	}
}
