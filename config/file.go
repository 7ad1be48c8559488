package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

// The config file (--config), YAML or JSON, holds any setting under its
// flag's name with _ for - (max_in_flight: 5000), but for these: the
// columns are a mapping (columns: {id: message_id} for --column-id), the
// header columns a list (header_columns for --header-column), and
// tables: a list of tables, each with its own table settings (see
// tableFlags) and its name (table: billing.outbox). A repeatable flag's
// key takes a list, --topic-config's a mapping too. A flag or variable
// wins over the file; in tables, a table's own key wins over both.
//
// Left out of the file are the flags that say what one command does
// rather than how outbox-cdc is configured.
var notInFile = []string{"config", "print", "json", "offline", "reason", "from", "to", "offsets", "to-topic", "dry-run"}

// file is a config file read, its settings not yet applied.
type file struct {
	path string
	root *yaml.Node // a mapping; nil: an empty file
}

func readFile(path string) (*file, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--config: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, usagef("--config %s: %v", path, err)
	}
	f := &file{path: path}
	if len(doc.Content) == 0 {
		return f, nil
	}
	if f.root = doc.Content[0]; f.root.Kind != yaml.MappingNode {
		return nil, usagef("--config %s: want a mapping of settings at the top, such as kafka_brokers: [127.0.0.1:9092]", path)
	}
	return f, nil
}

// fileKey is the config file's key for a flag.
func fileKey(flagName string) string {
	if col, ok := strings.CutPrefix(flagName, "column-"); ok {
		return "columns." + strings.ReplaceAll(col, "-", "_")
	}
	if flagName == "header-column" {
		return "header_columns"
	}
	return strings.ReplaceAll(flagName, "-", "_")
}

// fileKeys are the keys a mapping of f's flags accepts, by flag name.
func fileKeys(f *flags) map[string]string {
	keys := map[string]string{}
	for _, name := range f.order {
		if !slices.Contains(notInFile, name) {
			keys[fileKey(name)] = name
		}
	}
	return keys
}

// apply sets f's flags from the mapping n (where says which, for
// messages), skipping the keys in skip; it returns the flags it set.
func (fl *file) apply(n *yaml.Node, f *flags, where string, skip ...string) ([]string, error) {
	keys := fileKeys(f)
	var set []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if slices.Contains(skip, k.Value) {
			continue
		}
		pairs := [][2]*yaml.Node{{k, v}}
		if k.Value == "columns" {
			if v.Kind != yaml.MappingNode {
				return nil, fl.errorf(where, k, "want a mapping such as {id: message_id, event_type: type}")
			}
			pairs = nil
			for j := 0; j+1 < len(v.Content); j += 2 {
				ck := *v.Content[j]
				ck.Value = "columns." + ck.Value
				pairs = append(pairs, [2]*yaml.Node{&ck, v.Content[j+1]})
			}
		}
		for _, kv := range pairs {
			name, ok := keys[kv[0].Value]
			if !ok {
				return nil, fl.unknown(where, kv[0], keys)
			}
			err := setNode(f.fs.Lookup(name).Value, kv[1])
			if errors.Is(err, errNull) {
				continue // key: with no value is not set: the flag's or the default stands
			}
			if err != nil {
				return nil, fl.errorf(where, kv[0], "%v", err)
			}
			set = append(set, name)
		}
	}
	return set, nil
}

func (fl *file) errorf(where string, key *yaml.Node, format string, args ...any) error {
	return usagef("--config %s: %s%s (line %d): %s", fl.path, where, key.Value, key.Line, fmt.Sprintf(format, args...))
}

// unknown refuses key, suggesting the nearest known one.
func (fl *file) unknown(where string, key *yaml.Node, keys map[string]string) error {
	var known []string
	for k := range keys {
		known = append(known, k)
	}
	if col, ok := strings.CutPrefix(key.Value, "columns."); ok {
		var cols []string
		for _, k := range known {
			if c, ok := strings.CutPrefix(k, "columns."); ok {
				cols = append(cols, c)
			}
		}
		slices.Sort(cols)
		return usagef("--config %s: %sunknown column key %q (line %d); want one of %s", fl.path, where, col, key.Line, strings.Join(cols, ", "))
	}
	msg := fmt.Sprintf("--config %s: %sunknown key %q (line %d)", fl.path, where, key.Value, key.Line)
	if s := nearest(key.Value, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return usagef("%s", msg)
}

// errNull is a key given no value (key: or key: ~), which leaves the
// setting as the flags, the environment or the default made it.
var errNull = errors.New("no value")

// setNode sets v from a YAML value: a scalar as its text, a list item by
// item (joined by commas for a flag that is not repeatable), a mapping as
// KEY=VALUE items (--topic-config).
func setNode(v flag.Value, n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	r, repeatable := v.(interface{ reset() })
	var items []string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return errNull
		}
		return v.Set(n.Value)
	case yaml.SequenceNode:
		for _, it := range n.Content {
			if it.Kind != yaml.ScalarNode {
				return fmt.Errorf("want a list of values, such as [a, b]")
			}
			items = append(items, it.Value)
		}
	case yaml.MappingNode:
		if _, ok := v.(*configMap); !ok {
			return fmt.Errorf("want a value or a list of values, not a mapping")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			items = append(items, n.Content[i].Value+"="+n.Content[i+1].Value)
		}
	}
	if !repeatable {
		return v.Set(strings.Join(items, ","))
	}
	r.reset()
	for _, it := range items {
		if err := v.Set(it); err != nil {
			return err
		}
	}
	return nil
}

// tables are the file's tables, each from r's defaults with its own
// settings.
func (fl *file) tables(r *relay.Config) ([]relay.Table, error) {
	if fl.root == nil {
		return nil, nil
	}
	var list *yaml.Node
	for i := 0; i+1 < len(fl.root.Content); i += 2 {
		if fl.root.Content[i].Value == "tables" {
			list = fl.root.Content[i+1]
		}
	}
	if list == nil {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, usagef("--config %s: tables (line %d): want a list of tables, each a mapping with its table: name", fl.path, list.Line)
	}
	var out []relay.Table
	for i, n := range list.Content {
		var name string
		for j := 0; n.Kind == yaml.MappingNode && j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "table" {
				name = n.Content[j+1].Value
			}
		}
		if name == "" {
			return nil, usagef("--config %s: tables[%d] (line %d) has no table", fl.path, i, n.Line)
		}
		t := r.Table(name)
		f := &flags{fs: flag.NewFlagSet("table", flag.ContinueOnError), groups: map[string]group{}, layer: 1}
		tableFlags(f, &t, false)
		if _, err := fl.apply(n, f, fmt.Sprintf("tables[%d] (%s): ", i, name), "table"); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
