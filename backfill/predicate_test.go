package backfill

import (
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

func TestParsePredicate(t *testing.T) {
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
		{where: `U&"d\0061t\+000061" = 1`},
	} {
		p, err := ParsePredicate(tc.where)
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

func TestJudgePlan(t *testing.T) {
	tb := decode.Table{Schema: "public", Name: "outbox"}
	for _, tc := range []struct {
		name, plan, why string
	}{
		{"seq scan", `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "outbox", "Schema": "public"}}]`, ""},
		{"constant false", `[{"Plan": {"Node Type": "Result"}}]`, ""},
		{"partitions", `[{"Plan": {"Node Type": "Append", "Plans": [{"Node Type": "Seq Scan", "Parent Relationship": "Member", "Relation Name": "outbox_p1", "Schema": "public"}]}}]`, ""},
		{"subplan", `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "outbox", "Schema": "public", "Plans": [{"Node Type": "Seq Scan", "Parent Relationship": "SubPlan", "Subplan Name": "SubPlan 1", "Relation Name": "outbox", "Schema": "public"}]}}]`, "subquery"},
		{"another table", `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "secrets", "Schema": "public"}}]`, "reads public.secrets"},
		{"another schema", `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "outbox", "Schema": "other"}}]`, "reads other.outbox"},
		{"a join", `[{"Plan": {"Node Type": "Nested Loop"}}]`, "Nested Loop"},
		{"a function scan", `[{"Plan": {"Node Type": "Function Scan"}}]`, "Function Scan"},
		{"garbage", `{}`, "unreadable plan"},
	} {
		if why := judgePlan([]byte(tc.plan), tb); (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %q, want %q", tc.name, why, tc.why)
		}
	}
}

func TestAfterCondition(t *testing.T) {
	exprs := []orderExpr{{"ts", "timestamptz"}, {"id", "uuid"}}
	v := func(s string) *string { return &s }
	var args []any
	got := after(exprs, []*string{v("2024-01-01"), v("a")}, &args)
	want := "(ts IS NOT NULL AND (ts > $1::text::timestamptz OR (ts = $1::text::timestamptz AND (id IS NOT NULL AND (id > $2::text::uuid OR (id = $2::text::uuid AND false))))))"
	if got != want || len(args) != 2 {
		t.Errorf("got %s %v\nwant %s", got, args, want)
	}
	args = nil
	got = after(exprs, []*string{nil, v("a")}, &args)
	want = "(ts IS NOT NULL OR (ts IS NULL AND (id IS NOT NULL AND (id > $1::text::uuid OR (id = $1::text::uuid AND false)))))"
	if got != want || len(args) != 1 {
		t.Errorf("NULL timestamp: got %s %v\nwant %s", got, args, want)
	}
}
