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
