package config

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestWhere: --where is a per-table setting like --backfill-where: the
// flag (and OUTBOX_CDC_WHERE) sets every table's, a table of the config
// file its own; one that is not a single expression is a usage error
// naming the flag and the table.
func TestWhere(t *testing.T) {
	path := writeFile(t, "c.yaml", `
tables:
  - table: public.a
    where: target_broker = 'partner'
  - table: public.b
`)
	base := []string{"--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k:9092"}
	c, err := Parse(CmdRun, append(base, "--config", path, "--where", "target_broker IS NULL"), nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Relay.Tables[0], c.Relay.Tables[1]; a.Where != "target_broker = 'partner'" || b.Where != "target_broker IS NULL" {
		t.Errorf("tables' where %q and %q; want the file's for a, the flag's for b", a.Where, b.Where)
	}
	if w := c.Relay.Target().Where; w["public.a"] != "target_broker = 'partner'" || w["public.b"] != "target_broker IS NULL" {
		t.Errorf("the slot target's row filters %q", w)
	}
	c, err = Parse(CmdRun, base, []string{"OUTBOX_CDC_WHERE=target_broker = 'partner'"}, io.Discard)
	if err != nil || c.Relay.Tables[0].Where != "target_broker = 'partner'" {
		t.Errorf("OUTBOX_CDC_WHERE: %v, %+v", err, c.Relay.Tables)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--where", "1=1); DROP TABLE x; --"}},
		{[]string{"--where", "true; DROP TABLE x"}},
		{[]string{"--where", "id IN (SELECT id FROM secrets)"}},
		{[]string{"--where", "x = $1"}},
		{[]string{"--where", "x = 1 /* open"}},
		{[]string{"--where", "x = 1", "--table", ""}},
	} {
		_, err := Parse(CmdRun, append(base, tc.args...), nil, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--where") {
			t.Errorf("%q: %v, want a usage error naming --where", tc.args, err)
		}
	}
}

// TestBackfillWhereAllowList: a --backfill-where calling a function
// outside the predicate allow-list is a usage error naming the flag and
// the function, before anything connects.
func TestBackfillWhereAllowList(t *testing.T) {
	base := []string{"--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k:9092"}
	for _, tc := range []struct{ where, want string }{
		{"table_to_xml('public.users'::regclass,true,false,'')::text like '%admin%'", "table_to_xml is not allowed"},
		{"(database_to_xml(true,false,'')::text)::int = 1", "database_to_xml is not allowed"},
	} {
		_, err := Parse(CmdRun, append(base, "--backfill-where", tc.where), nil, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--backfill-where") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error naming --backfill-where and saying %q", tc.where, err, tc.want)
		}
	}
	if _, err := Parse(CmdRun, append(base, "--backfill-where", "created_at > now() - interval '7 days'"), nil, io.Discard); err != nil {
		t.Errorf("a predicate on the allow-list: %v", err)
	}
}
