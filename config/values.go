package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
)

// The flag.Value types of settings that are more than a string, a number,
// a bool or a duration. Each parses its text once, into the typed field of
// relay.Config it is bound to.

// list is a repeatable flag: each Set adds the items of one value. Its
// sources replace each other (the command line replaces the environment,
// which replaces the file), unless add says they add up.
type list[T any] struct {
	dst   *[]T
	parse func(string) ([]T, error)
	layer *int // the source being read (see flags.layer)
	set   int  // the source of the last Set
	add   bool
	text  []string // as given, for String
}

func (l *list[T]) Set(s string) error {
	items, err := l.parse(s)
	if err != nil {
		return err
	}
	if !l.add && l.set != *l.layer {
		*l.dst, l.text = nil, nil
	}
	l.set = *l.layer
	*l.dst = append(*l.dst, items...)
	l.text = append(l.text, s)
	return nil
}

func (l *list[T]) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.text, ",")
}

// reset empties the list: a config file's empty list says "none".
func (l *list[T]) reset() { *l.dst, l.text, l.set = nil, nil, *l.layer }

// marks parses --mark's or --mark-dead's COLUMN=VALUE items (dead: with
// VALUE reason too), comma-separated outside quotes.
func marks(dead bool) func(string) ([]cleanup.Set, error) {
	return func(s string) ([]cleanup.Set, error) {
		var out []cleanup.Set
		for _, part := range splitUnquoted(s) {
			set, err := cleanup.ParseSet(part, dead)
			if err != nil {
				return nil, err
			}
			out = append(out, set)
		}
		return out, nil
	}
}

// headerColumns parses --header-column's COLUMN or COLUMN:HEADER items,
// comma-separated.
func headerColumns(s string) ([]decode.HeaderColumn, error) {
	var out []decode.HeaderColumn
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		col, name, _ := strings.Cut(part, ":")
		if col == "" {
			return nil, fmt.Errorf("header column %q: want COLUMN or COLUMN:HEADER", part)
		}
		out = append(out, decode.HeaderColumn{Column: col, Header: name})
	}
	return out, nil
}

// words parses a comma-separated list, such as --kafka-brokers or --reason.
func words(s string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out, nil
}

// splitUnquoted splits s at commas outside single quotes.
func splitUnquoted(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] == '\'' {
			quoted = !quoted
		}
		if i == len(s) || s[i] == ',' && !quoted {
			if part := strings.TrimSpace(s[start:i]); part != "" {
				out = append(out, part)
			}
			start = i + 1
		}
	}
	return out
}

// configMap is the repeatable --topic-config: KEY=VALUE items,
// comma-separated outside quotes; its sources replace each other.
type configMap struct {
	dst   *map[string]string
	layer *int
	set   int
}

func (m *configMap) Set(s string) error {
	if m.set != *m.layer {
		*m.dst = nil
	}
	m.set = *m.layer
	for _, kv := range splitUnquoted(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want KEY=VALUE, such as min.insync.replicas=2", kv)
		}
		if *m.dst == nil {
			*m.dst = map[string]string{}
		}
		(*m.dst)[k] = v
	}
	return nil
}

func (m *configMap) String() string {
	if m == nil || m.dst == nil {
		return ""
	}
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(*m.dst)) {
		kvs = append(kvs, k+"="+(*m.dst)[k])
	}
	return strings.Join(kvs, ",")
}

func (m *configMap) reset() { *m.dst, m.set = nil, *m.layer }

// brokers is --kafka-brokers: one comma-separated list, replaced whole.
type brokers struct{ dst *[]string }

func (b brokers) Set(s string) error { *b.dst, _ = words(s); return nil }

func (b brokers) String() string {
	if b.dst == nil {
		return ""
	}
	return strings.Join(*b.dst, ",")
}

// enum is a flag of a string type whose values relay.Config.Validate
// checks, naming the flag.
type enum[T ~string] struct{ dst *T }

func (e enum[T]) Set(s string) error { *e.dst = T(s); return nil }

func (e enum[T]) String() string {
	if e.dst == nil {
		return ""
	}
	return string(*e.dst)
}

// order is --backfill-order, spelled as backfill.Orders spell it; a value
// that is none of them is kept for Validate to refuse.
type order struct{ dst *backfill.Order }

func (o order) Set(s string) error {
	*o.dst = backfill.Order(s)
	if v, err := backfill.ParseOrder(s); err == nil {
		*o.dst = v
	}
	return nil
}

func (o order) String() string {
	if o.dst == nil {
		return ""
	}
	return string(*o.dst)
}

// Values of --null-key.
const (
	NullKeyDeadLetter = "dead-letter"
	NullKeyAllow      = "allow"
)

// nullKey is --null-key: decode.Columns.NullKey as a word.
type nullKey struct{ dst *bool }

func (n nullKey) String() string {
	if n.dst != nil && *n.dst {
		return NullKeyAllow
	}
	return NullKeyDeadLetter
}

func (n nullKey) Set(s string) error {
	switch s {
	case NullKeyDeadLetter:
		*n.dst = false
	case NullKeyAllow:
		*n.dst = true
	default:
		return fmt.Errorf("%q: want dead-letter or allow", s)
	}
	return nil
}
