package backfill

import (
	"strings"
	"testing"
)

// TestPredicateOverTypesOutsidePgCatalog: the backfill resolves a
// predicate's operators in pg_catalog alone, so a column of a type from
// elsewhere (citext in public) would be compared as text, silently
// case-sensitive. Such a column is refused unless cast at once to the
// built-in type meant; an enum's operators are pg_catalog's own, and a
// domain or an array compares as its base or element type.
func TestPredicateOverTypesOutsidePgCatalog(t *testing.T) {
	types := map[string]columnType{
		"email":    {declared: "public.citext", schema: "public", kind: "b"},
		"aliases":  {declared: "public.citext[]", schema: "public", kind: "b"},
		"status":   {declared: "public.outbox_status", schema: "public", kind: "e"},
		"address":  {declared: "public.email_text", schema: "pg_catalog", kind: "b"},
		"spot":     {declared: "public.place", schema: "public", kind: "c"},
		"tenant":   {declared: "text", schema: "pg_catalog", kind: "b"},
		"geo_area": {declared: "extensions.geometry", schema: "extensions", kind: "b"},
	}
	for _, tc := range []struct {
		where, why string // why "": accepted
	}{
		{where: "tenant = 'a' AND status = 'pending' AND address = 'x'"},
		{where: "email::text = 'a@b' AND lower(CAST(email AS text)) = 'a@b'"},
		{where: "outbox::text like '%x%' AND unknown_name = 1"},
		{where: "email = 'A@B'", why: `column "email" is of type public.citext`},
		{where: "tenant = 'a' AND lower(email) = 'a'", why: `column "email" is of type public.citext`},
		{where: "(email)::text = 'a'", why: `column "email" is of type public.citext`},
		{where: "'a' = any(aliases)", why: `column "aliases" is of type public.citext[]`},
		{where: "spot IS NULL", why: `column "spot" is of type public.place`},
		{where: "geo_area IS NOT NULL", why: `column "geo_area" is of type extensions.geometry`},
	} {
		p, err := ParsePredicate(tc.where)
		if err != nil {
			t.Fatalf("%q: %v", tc.where, err)
		}
		why := judgeColumnTypes(p, types)
		if (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%q: %q, want %q", tc.where, why, tc.why)
		}
	}
}
