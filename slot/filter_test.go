package slot

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

func filterTarget(where map[string]string, tables ...string) Target {
	t := Target{Publication: "outbox_partner", Slot: "outbox_partner", Where: where}
	for _, name := range tables {
		schema, table, _ := strings.Cut(name, ".")
		t.Tables = append(t.Tables, decode.Table{Schema: schema, Name: table})
	}
	return t
}

// TestCreatePublicationWithRowFilters: a --where reaches CREATE
// PUBLICATION rendered from its tokens, per table; an injection attempt
// never reaches it, and is refused as ErrNotReady (permanent).
func TestCreatePublicationWithRowFilters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where map[string]string
		want  string // the statement; "" when refused
		err   string
	}{
		{name: "no filter", want: `CREATE PUBLICATION "outbox_partner" FOR TABLE "public"."outbox", "billing"."outbox" WITH (publish = 'insert')`},
		{name: "one table filtered", where: map[string]string{"public.outbox": "target_broker = 'partner' -- the partner's"},
			want: `CREATE PUBLICATION "outbox_partner" FOR TABLE "public"."outbox" WHERE (target_broker = 'partner'), "billing"."outbox" WITH (publish = 'insert')`},
		{name: "both filtered", where: map[string]string{"public.outbox": "target_broker IS DISTINCT FROM 'partner'", "billing.outbox": `"Target" = 'x'`},
			want: `CREATE PUBLICATION "outbox_partner" FOR TABLE "public"."outbox" WHERE (target_broker IS DISTINCT FROM 'partner'), "billing"."outbox" WHERE ("Target" = 'x') WITH (publish = 'insert')`},
		{name: "closing parenthesis", where: map[string]string{"public.outbox": "1=1); DROP TABLE x; --"}, err: "closes what it did not open"},
		{name: "semicolon", where: map[string]string{"public.outbox": "true; DROP TABLE x"}, err: "semicolon"},
		{name: "comment hiding the rest", where: map[string]string{"public.outbox": "true /* ) WITH (publish = 'insert, update'); --"}, err: "unterminated comment"},
		{name: "subquery", where: map[string]string{"public.outbox": "id IN (SELECT id FROM secrets)"}, err: `"SELECT"`},
		{name: "a second table", where: map[string]string{"public.outbox": "true), TABLE secrets WHERE (true"}, err: "closes what it did not open"},
	} {
		got, err := filterTarget(tc.where, "public.outbox", "billing.outbox").createPublication()
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--where")):
			t.Errorf("%s: %q, %v; want ErrNotReady naming --where and saying %q", tc.name, got, err, tc.err)
		case tc.err != "" && got != "":
			t.Errorf("%s: a refused filter still made the statement %q", tc.name, got)
		}
	}
}

func TestRowFilterUnsupported(t *testing.T) {
	filtered := filterTarget(map[string]string{"public.outbox": "target_broker = 'partner'"}, "public.outbox")
	plain := filterTarget(map[string]string{"public.outbox": ""}, "public.outbox")
	for _, tc := range []struct {
		name    string
		version int
		t       Target
		refused bool
	}{
		{"14 with --where", 140012, filtered, true},
		{"15 with --where", 150004, filtered, false},
		{"18 with --where", 180000, filtered, false},
		{"14 without --where", 140012, plain, false},
	} {
		why := rowFilterUnsupported(Server{Num: tc.version}, tc.t)
		if (why != "") != tc.refused {
			t.Errorf("%s: %q, want refused %v", tc.name, why, tc.refused)
		}
		if tc.refused && (!strings.Contains(why, "PostgreSQL 15 or newer") || !strings.Contains(why, "row filter") || !strings.Contains(why, "PostgreSQL 14") || strings.Contains(why, "\n")) {
			t.Errorf("%s: %q does not say in one line that row filters need 15 and this is 14", tc.name, why)
		}
	}
}

func TestCheckPublishes(t *testing.T) {
	filtered := filterTarget(map[string]string{"public.outbox": "target_broker = 'partner'"}, "public.outbox")
	if err := checkPublishes(filtered, false, false); err != nil {
		t.Errorf("insert only: %v", err)
	}
	for _, ud := range [][2]bool{{true, false}, {false, true}} {
		err := checkPublishes(filtered, ud[0], ud[1])
		if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), `SET (publish = 'insert')`) {
			t.Errorf("update %v, delete %v: %v; want ErrNotReady saying to publish inserts only", ud[0], ud[1], err)
		}
	}
	if err := checkPublishes(filterTarget(nil, "public.outbox"), true, true); err != nil {
		t.Errorf("no filter, update and delete: %v; want accepted as before", err)
	}
}

func TestDriftMessage(t *testing.T) {
	d := filterDrift{tables: []string{"public.outbox"},
		alter: `ALTER PUBLICATION "p" SET TABLE "public"."outbox" WHERE (target_broker = 'partner');`}
	msg := d.message("p")
	for _, want := range []string{`publication "p"`, `"public"."outbox"`, d.alter, "never alters"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%q is more than one line", msg)
	}
}
