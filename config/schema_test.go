package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

var update = flag.Bool("update", false, "rewrite docs/config.schema.json from the flags")

const schemaPath = "../docs/config.schema.json"

// TestSchemaIsTheFlags: docs/config.schema.json is what the flags say
// (names, types, defaults, docs); go test ./config -update rewrites it.
func TestSchemaIsTheFlags(t *testing.T) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(schema()); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaPath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("%s is not what the flags say; run go test ./config -run TestSchemaIsTheFlags -update", schemaPath)
	}
}

// TestSchemaKeysLoad holds the schema to the loader: every key the schema
// has is accepted (with its default, or an empty list), and its keys are
// all the loader accepts: another is refused, named with the file.
func TestSchemaKeysLoad(t *testing.T) {
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]map[string]any
		Defs       map[string]struct{ Properties map[string]map[string]any } `json:"$defs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	value := func(p map[string]any) any {
		switch {
		case p["default"] != nil:
			return p["default"]
		case p["type"] == "string":
			return ""
		case p["type"] == "integer":
			return 0
		}
		return []any{}
	}
	top, table := map[string]any{}, map[string]any{}
	for k, p := range s.Properties {
		top[k] = value(p)
	}
	for k, p := range s.Defs["table"].Properties {
		if tp, ok := s.Properties[k]; ok {
			p = tp // the top level's default
		}
		table[k] = value(p)
	}
	top["tables"], table["table"] = []any{table}, "billing.outbox"
	top["postgres_url"], top["kafka_brokers"], top["message_prefix"] = "postgres://x", "k:1", "m"
	cols := map[string]any{}
	for k, p := range s.Defs["columns"].Properties {
		cols[k] = p["default"]
	}
	top["columns"], table["columns"] = cols, map[string]any{"payload": "body"}
	c := parseFile(t, top)
	if c.TableNames() != "public.outbox,billing.outbox" {
		t.Errorf("tables %s", c.TableNames())
	}

	var c0 Config
	keys := fileKeys(newFlags(&c0))
	tf := &flags{fs: flag.NewFlagSet("", flag.ContinueOnError), groups: map[string]group{}}
	tableFlags(tf, &relay.Table{}, false)
	tableKeys := fileKeys(tf)
	for _, tt := range []struct {
		props map[string]map[string]any
		keys  map[string]string
		what  string
	}{{s.Properties, keys, "top level"}, {s.Defs["table"].Properties, tableKeys, "a table"}} {
		for k := range tt.keys {
			if col, ok := strings.CutPrefix(k, "columns."); ok {
				if _, ok := s.Defs["columns"].Properties[col]; !ok {
					t.Errorf("the loader accepts columns.%s, the schema has no such column", col)
				}
			} else if _, ok := tt.props[k]; !ok {
				t.Errorf("the loader accepts %s at %s, the schema does not", k, tt.what)
			}
		}
	}
	for _, bad := range []map[string]any{{"max_in_flihgt": 5}, {"tables": []any{map[string]any{"table": "a.b", "columns": map[string]any{"ids": "x"}}}}} {
		_, err := parse(t, bad)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("%v: %v, want an unknown key named with the file", bad, err)
		}
	}
}

func parse(t *testing.T, file map[string]any) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return Parse(CmdRun, []string{"--config", path}, nil, io.Discard)
}

func parseFile(t *testing.T, file map[string]any) Config {
	t.Helper()
	c, err := parse(t, file)
	if err != nil {
		t.Fatalf("%v:\n%v", file, err)
	}
	return c
}

// schema describes the config file from the flags.
func schema() map[string]any {
	c := defaults(CmdRun)
	f := newFlags(&c)
	props, cols := map[string]any{}, map[string]any{}
	for k, name := range fileKeys(f) {
		if col, ok := strings.CutPrefix(k, "columns."); ok {
			cols[col] = property(f.fs.Lookup(name), "")
		} else {
			props[k] = property(f.fs.Lookup(name), "")
		}
	}
	props["columns"] = map[string]any{"$ref": "#/$defs/columns", "description": "the column mapping of every table (each --column-* flag): a table of tables may have its own"}
	props["tables"] = map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/table"},
		"description": "outbox tables, each with its own settings, which win over the flags, the variables and the top level; with --table (or table) as well, a table in both takes these, and without it these replace its default"}
	var t relay.Table
	tf := &flags{fs: flag.NewFlagSet("", flag.ContinueOnError), groups: map[string]group{}}
	tableFlags(tf, &t, false)
	tprops := map[string]any{"table": map[string]any{"type": "string", "description": "the table, schema.table or table (in public)"}}
	for k, name := range fileKeys(tf) {
		if !strings.HasPrefix(k, "columns.") {
			p := property(tf.fs.Lookup(name), " This table's own; default: the top level's, the flag's or the variable's.")
			delete(p, "default")
			tprops[k] = p
		}
	}
	tprops["columns"] = map[string]any{"$ref": "#/$defs/columns", "description": "this table's column mapping; a column not named keeps the default"}
	object := func(desc string, props map[string]any) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "description": desc, "properties": props}
	}
	table := object("one outbox table", tprops)
	table["required"] = []string{"table"}
	top := object("outbox-cdc's configuration file (--config, OUTBOX_CDC_CONFIG), YAML or JSON. Each key is a flag's name with _ for -; "+
		"a flag on the command line wins over its OUTBOX_CDC_ variable, which wins over this file, which wins over the default. "+
		"A key no flag has is refused.", props)
	top["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	top["$id"] = "https://github.com/outbox-cdc/outbox-cdc/blob/main/docs/config.schema.json"
	top["title"] = "outbox-cdc configuration file"
	top["$defs"] = map[string]any{"table": table, "columns": object("column names of an outbox table (the --column-* flags)", cols)}
	return top
}

// property describes one flag's key: its type, default and doc.
func property(fl *flag.Flag, more string) map[string]any {
	p := map[string]any{"description": fmt.Sprintf("%s (--%s, %s).%s", fl.Usage, fl.Name, EnvName(fl.Name), more)}
	list := map[string]any{"type": []string{"array", "string"}, "items": map[string]any{"type": "string"}}
	switch v := fl.Value.(type) {
	case flag.Getter:
		switch d := v.Get().(type) {
		case bool:
			p["type"], p["default"] = "boolean", d
		case int, int64:
			p["type"], p["default"] = "integer", d
		case time.Duration:
			p["type"], p["default"], p["pattern"] = "string", d.String(), `^(0|-?([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
		default:
			p["type"], p["default"] = "string", fl.DefValue
		}
	case *configMap:
		p["type"], p["items"], p["additionalProperties"] = []string{"object", "array", "string"}, list["items"], map[string]any{"type": []string{"string", "number", "boolean"}}
	case interface{ reset() }, brokers:
		p["type"], p["items"] = list["type"], list["items"]
	default:
		p["type"], p["default"] = "string", fl.DefValue
	}
	if fl.Name == "table" {
		p["type"], p["items"] = list["type"], list["items"]
	}
	if e, ok := enums[fl.Name]; ok {
		p["enum"] = e
	}
	return p
}

// enums are the values of the flags that take one of a few.
var enums = map[string][]string{
	"slot-failover": {"auto", "true", "false"}, "null-key": {NullKeyDeadLetter, NullKeyAllow},
	"kafka-sasl-mechanism": {"", "plain", "scram-sha-256", "scram-sha-512"}, "on-invalid": {"dlq", "fail"},
	"kafka-compression": {"none", "gzip", "snappy", "lz4", "zstd"}, "envelope": {"raw", "cloudevents", "cloudevents-structured", "connect-json"},
	"cleanup": {"none", "delete-after-publish", "mark"}, "backfill-order": {"auto", "commit", "timestamp", "id"},
	"log-format": {"text", "json"}, "log-level": {"debug", "info", "warn", "error"},
	"null-payload": {"dead-letter", "tombstone"}, "timestamp": {"column", "commit"},
	"contracts-unknown": {"allow", "dead-letter"}, "on-slot-lost": {"fail", "heal"},
}

// TestEnumsAreValidated: each enum value above is accepted, another is
// refused naming the flag.
func TestEnumsAreValidated(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--backfill-where", "true"}
	for name, values := range enums {
		for _, v := range append(slices.Clone(values), "bogus") {
			args := append(slices.Clone(base), "--"+name+"="+v)
			switch {
			case name == "on-slot-lost" && v == "heal":
				args = append(args, "--cleanup", "delete-after-publish")
			case name == "cleanup" && v == "mark":
				args = append(args, "--mark", "done=true")
			case name == "contracts-unknown" && v == "dead-letter":
				args = append(args, "--contracts", "contracts") // read by relay.New, not by Parse
			case name == "kafka-sasl-mechanism" && v != "":
				args = append(args, "--kafka-sasl-username", "u", "--kafka-sasl-password", "p", "--kafka-sasl-allow-plaintext")
			}
			_, err := Parse(CmdRun, args, nil, io.Discard)
			if (err != nil) != (v == "bogus") || err != nil && !strings.Contains(err.Error(), "-"+name) {
				t.Errorf("--%s=%s: %v", name, v, err)
			}
		}
	}
}
