package backfill

import (
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

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
	got := afterKey(exprs, []*string{v("2024-01-01"), v("a")}, &args, false)
	want := "(ts IS NOT NULL AND (ts > $1::text::timestamptz OR (ts = $1::text::timestamptz AND (id IS NOT NULL AND (id > $2::text::uuid OR (id = $2::text::uuid AND false))))))"
	if got != want || len(args) != 2 {
		t.Errorf("got %s %v\nwant %s", got, args, want)
	}
	args = nil
	got = afterKey(exprs, []*string{nil, v("a")}, &args, false)
	want = "(ts IS NOT NULL OR (ts IS NULL AND (id IS NOT NULL AND (id > $1::text::uuid OR (id = $1::text::uuid AND false)))))"
	if got != want || len(args) != 1 {
		t.Errorf("NULL timestamp: got %s %v\nwant %s", got, args, want)
	}
}

// TestPredicateAllowList: a --backfill-where is judged without a server
// against an allow-list of the built-ins a predicate over the row's own
// values needs; anything else (a function reading other tables or the
// server's state, a cast to a catalogue type, a subquery, a comment) is
// refused, the error naming what it refused.
func TestPredicateAllowList(t *testing.T) {
	for _, tc := range []struct {
		where string
		err   string // "": accepted
	}{
		{where: "status = 'pending'"},
		{where: `"Sent" = false`},
		{where: "created_at > now() - interval '7 days'"},
		{where: "payload->>'tenant' = 'a'"},
		{where: "id::text like '1%'"},
		{where: "aggregate_type in ('a','b')"},
		{where: "x is not null and not y"},
		{where: `aggregate_type <> E'it\'s ) ;' AND payload::text <> 'a;b--c/*' AND created_at <= now() - interval '1 day' AND lower(event_type) <> 'x' AND payload->>'k' IS NULL`},
		{where: "table_to_xml('public.users'::regclass,true,false,'')::text like '%admin%'", err: "table_to_xml is not allowed in --backfill-where; allowed: "},
		{where: "(database_to_xml(true,false,'')::text)::int = 1", err: "database_to_xml is not allowed in --backfill-where"},
		{where: "pg_read_file('/etc/passwd') <> ''", err: "pg_read_file is not allowed"},
		{where: "current_setting('is_superuser') = 'on'", err: "current_setting is not allowed"},
		{where: "id::regclass is not null", err: "a cast to regclass is not allowed"},
		{where: "status = 'a' -- a comment", err: "comment"},
	} {
		_, err := ParsePredicate(tc.where)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tc.where, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.where, err, tc.err)
		}
	}
}

// TestRowFilterNarrowsWithinAllowList: a backfill narrowed by its table's
// --where runs that filter in its own query, so the filter is held to the
// same allow-list, its error naming --where; one within it is joined on.
func TestRowFilterNarrowsWithinAllowList(t *testing.T) {
	got, err := withRowFilter("status = 'pending'", "target_broker = 'partner' -- the partner's cluster")
	if want := "(status = 'pending') AND (target_broker = 'partner')"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	_, err = withRowFilter("status = 'pending'", "table_to_xml('public.users'::regclass, true, false, '')::text <> ''")
	if err == nil || !strings.HasPrefix(err.Error(), "--where") || !strings.Contains(err.Error(), "table_to_xml is not allowed") {
		t.Errorf("a --where off the allow-list: %v", err)
	}
}
