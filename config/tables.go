package config

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TableConfig is one outbox table: its column mapping and its topic.
type TableConfig struct {
	decode.Table
	Topic            string // topic template, see sink.ParseTopic
	TopicRegex       string // rewrites routed names that match it whole; empty: none
	TopicReplacement string // what they become, $1 for the first group
	TopicAllow       string // routed names (after the rewrite) must match it whole; empty: any
	// Mark and MarkDead are COLUMN=VALUE (see cleanup.ParseSet): what
	// --cleanup=mark sets on published and on dead-lettered rows.
	Mark, MarkDead []string
	// BackfillWhere selects the rows published, from the slot's exported
	// snapshot, before streaming begins; empty: none.
	BackfillWhere string
	// BackfillOrder is the order the backfill reads rows in: auto, commit,
	// timestamp or id (see backfill.Order).
	BackfillOrder string
	// Partitions, ReplicationFactor and TopicConfigs (KEY=VALUE) are how
	// the table's missing topics are created; 0: the broker's default.
	Partitions, ReplicationFactor int
	TopicConfigs                  []string
}

// fileConfig is the --config file, YAML or JSON: settings beyond flags.
//
//	tables:
//	  - table: billing.outbox          # schema.table, required
//	    topic: billing.{event_type}    # default: --topic
//	    columns:                       # each default: its --column-* flag
//	      aggregate_type: aggregatetype
//	      aggregate_id: aggregateid
//	      event_type: type
//	    header_columns: [correlation_id, "tenant_id:tenant"]   # default: --header-column
//	    null_key: allow                # default: --null-key
//	    topic_regex: 'legacy\.(.*)'    # default: --topic-regex
//	    topic_replacement: 'new.$1'    # default: --topic-replacement
//	    topic_allow: 'billing\.(invoice|payment)'   # default: --topic-allow
//	    mark: ["status='Published'", "published_at=now()"]   # default: --mark
//	    mark_dead: ["status='Failed'", "last_error=reason"]  # default: --mark-dead
//	    backfill_where: "status <> 'Published'"              # default: --backfill-where
//	    backfill_order: id                                   # default: --backfill-order
//	    topic_partitions: 12                                 # default: --topic-partitions
//	    topic_replication_factor: 3                          # default: --topic-replication-factor
//	    topic_config: {min.insync.replicas: "2"}             # default: --topic-config
type fileConfig struct {
	Tables []struct {
		Table            string            `yaml:"table"`
		Topic            string            `yaml:"topic"`
		Columns          map[string]string `yaml:"columns"`
		HeaderColumns    []string          `yaml:"header_columns"`
		NullKey          *string           `yaml:"null_key"`
		TopicRegex       *string           `yaml:"topic_regex"`
		TopicReplacement *string           `yaml:"topic_replacement"`
		TopicAllow       *string           `yaml:"topic_allow"`
		Mark             []string          `yaml:"mark"`
		MarkDead         []string          `yaml:"mark_dead"`
		BackfillWhere    *string           `yaml:"backfill_where"`
		BackfillOrder    *string           `yaml:"backfill_order"`
		Partitions       *int              `yaml:"topic_partitions"`
		Replication      *int              `yaml:"topic_replication_factor"`
		TopicConfigs     map[string]string `yaml:"topic_config"`
	} `yaml:"tables"`
}

// columnKeys are the keys of a table's columns in the --config file.
var columnKeys = []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers", "timestamp"}

func columnField(c *decode.Columns, key string) *string {
	return map[string]*string{
		"id": &c.ID, "aggregate_type": &c.AggregateType, "aggregate_id": &c.AggregateID, "event_type": &c.EventType,
		"payload": &c.Payload, "headers": &c.Headers, "timestamp": &c.Timestamp,
	}[key]
}

// tables builds the table list from --table (each with the flags' mapping)
// and the --config file (each with its own, falling back to the flags'). A
// table in both takes the file's settings. When --table was not set, the
// file's tables replace its default.
func (c *Config) tables(list string, tableSet bool, path string) error {
	var fromFile []TableConfig
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return usagef("--config: %v", err)
		}
		var f fileConfig
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			return usagef("--config %s: %v", path, err)
		}
		for i, ft := range f.Tables {
			if ft.Table == "" {
				return usagef("--config %s: tables[%d] has no table", path, i)
			}
			tc := c.Table(ft.Table)
			if ft.Topic != "" {
				tc.Topic = ft.Topic
			}
			if ft.NullKey != nil {
				if err := setNullKey(&tc.Columns.NullKey, *ft.NullKey); err != nil {
					return usagef("--config %s: table %s: null_key: %v", path, ft.Table, err)
				}
			}
			if ft.TopicRegex != nil {
				tc.TopicRegex = *ft.TopicRegex
			}
			if ft.TopicReplacement != nil {
				tc.TopicReplacement = *ft.TopicReplacement
			}
			if ft.TopicAllow != nil {
				tc.TopicAllow = *ft.TopicAllow
			}
			if ft.Mark != nil {
				tc.Mark = ft.Mark
			}
			if ft.MarkDead != nil {
				tc.MarkDead = ft.MarkDead
			}
			if ft.BackfillWhere != nil {
				tc.BackfillWhere = *ft.BackfillWhere
			}
			if ft.BackfillOrder != nil {
				tc.BackfillOrder = *ft.BackfillOrder
			}
			if ft.Partitions != nil {
				tc.Partitions = *ft.Partitions
			}
			if ft.Replication != nil {
				tc.ReplicationFactor = *ft.Replication
			}
			if ft.TopicConfigs != nil {
				tc.TopicConfigs = nil
				for _, k := range slices.Sorted(maps.Keys(ft.TopicConfigs)) {
					tc.TopicConfigs = append(tc.TopicConfigs, k+"="+ft.TopicConfigs[k])
				}
			}
			for k, v := range ft.Columns {
				dst := columnField(&tc.Columns, k)
				if dst == nil {
					return usagef("--config %s: table %s: unknown column key %q; want one of %s", path, ft.Table, k, strings.Join(columnKeys, ", "))
				}
				*dst = v
			}
			if ft.HeaderColumns != nil {
				tc.Columns.HeaderColumns = nil
				for _, h := range ft.HeaderColumns {
					hc, err := parseHeaderColumn(h)
					if err != nil {
						return usagef("--config %s: table %s: %v", path, ft.Table, err)
					}
					tc.Columns.HeaderColumns = append(tc.Columns.HeaderColumns, hc)
				}
			}
			fromFile = append(fromFile, tc)
		}
	}
	if tableSet || len(fromFile) == 0 {
		for _, name := range strings.Split(list, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			c.Tables = append(c.Tables, c.Table(name))
		}
	}
	for _, ft := range fromFile {
		i := slices.IndexFunc(c.Tables, func(t TableConfig) bool { return t.Qualified() == ft.Qualified() })
		if i >= 0 {
			c.Tables[i] = ft
		} else {
			c.Tables = append(c.Tables, ft)
		}
	}
	return nil
}

// Values of --null-key.
const (
	NullKeyDeadLetter = "dead-letter"
	NullKeyAllow      = "allow"
)

func setNullKey(dst *bool, v string) error {
	switch v {
	case NullKeyDeadLetter:
		*dst = false
	case NullKeyAllow:
		*dst = true
	default:
		return fmt.Errorf("%q: want dead-letter or allow", v)
	}
	return nil
}

// sets is the repeatable --mark and --mark-dead; their environment
// variables hold a comma-separated list (commas inside quotes kept). Given
// on the command line, the flag replaces what the environment said.
type sets struct {
	dst      *[]string
	envDone  bool // the environment has been read: the next Set is a flag's
	replaced bool
}

func (l *sets) String() string {
	if l == nil || l.dst == nil {
		return ""
	}
	return strings.Join(*l.dst, ",")
}

func (l *sets) Set(s string) error {
	if l.envDone && !l.replaced {
		*l.dst, l.replaced = nil, true
	}
	quoted, start := false, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] == '\'' {
			quoted = !quoted
		}
		if i == len(s) || s[i] == ',' && !quoted {
			if part := strings.TrimSpace(s[start:i]); part != "" {
				*l.dst = append(*l.dst, part)
			}
			start = i + 1
		}
	}
	return nil
}

// environmentRead tells a flag that what follows comes from the command
// line.
func (l *sets) environmentRead() { l.envDone = true }

// nullKey is the --null-key flag.
type nullKey struct{ dst *bool }

func (n nullKey) String() string {
	if n.dst != nil && *n.dst {
		return NullKeyAllow
	}
	return NullKeyDeadLetter
}

func (n nullKey) Set(s string) error { return setNullKey(n.dst, s) }

// parseHeaderColumn reads COLUMN or COLUMN:HEADER.
func parseHeaderColumn(s string) (decode.HeaderColumn, error) {
	col, name, _ := strings.Cut(strings.TrimSpace(s), ":")
	if col == "" {
		return decode.HeaderColumn{}, fmt.Errorf("header column %q: want COLUMN or COLUMN:HEADER", s)
	}
	return decode.HeaderColumn{Column: col, Header: name}, nil
}

// headerColumns is the repeatable --header-column flag; its environment
// variable holds a comma-separated list.
type headerColumns struct{ dst *[]decode.HeaderColumn }

func (h headerColumns) String() string {
	if h.dst == nil {
		return ""
	}
	var parts []string
	for _, c := range *h.dst {
		if c.Header != "" {
			parts = append(parts, c.Column+":"+c.Header)
		} else {
			parts = append(parts, c.Column)
		}
	}
	return strings.Join(parts, ",")
}

func (h headerColumns) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		hc, err := parseHeaderColumn(part)
		if err != nil {
			return err
		}
		*h.dst = append(*h.dst, hc)
	}
	return nil
}

// reservedHeaderNames are set by outbox-cdc itself.
var reservedHeaderNames = []string{"id", "event_type", "aggregate_type", "content-type"}

func (c Config) validateTables(columns bool) error {
	switch {
	case len(c.Tables) == 0 && c.MessagePrefix == "":
		return usagef("--table: name at least one outbox table, or relay messages alone with --table '' and a --message-prefix")
	case c.MessagePrefix == decode.HeartbeatPrefix:
		return usagef("--message-prefix %q is outbox-cdc's heartbeat prefix; choose another", c.MessagePrefix)
	case strings.ContainsRune(c.MessagePrefix, 0):
		return usagef("--message-prefix must not contain a NUL byte")
	}
	seen := map[string]bool{}
	for _, t := range c.Tables {
		q := t.Qualified()
		switch {
		case t.Schema == "" || t.Name == "" || strings.Contains(t.Name, "."):
			return usagef("--table %q: want table or schema.table", q)
		case seen[q]:
			return usagef("--table: %s is listed twice", q)
		case columns && t.Topic == "":
			return usagef("table %s: the topic must not be empty", q)
		}
		seen[q] = true
		if !columns {
			continue
		}
		cols := t.Columns
		for _, m := range t.Mark {
			if _, err := cleanup.ParseSet(m, false); err != nil {
				return usagef("--mark %v (table %s)", err, q)
			}
		}
		for _, m := range t.MarkDead {
			if _, err := cleanup.ParseSet(m, true); err != nil {
				return usagef("--mark-dead %v (table %s)", err, q)
			}
		}
		if t.Partitions < 0 || t.ReplicationFactor < 0 {
			return usagef("--topic-partitions and --topic-replication-factor (table %s): want 0 (the broker's default) or more", q)
		}
		for _, kv := range t.TopicConfigs {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return usagef("--topic-config %q (table %s): want KEY=VALUE, such as min.insync.replicas=2", kv, q)
			}
		}
		if t.TopicRegex != "" {
			if _, err := regexp.Compile(t.TopicRegex); err != nil {
				return usagef("--topic-regex %q (table %s): %v", t.TopicRegex, q, err)
			}
		}
		if _, err := regexp.Compile(t.TopicAllow); err != nil {
			return usagef("--topic-allow %q (table %s): %v", t.TopicAllow, q, err)
		}
		for _, r := range []struct{ flag, v string }{
			{"column-id", cols.ID}, {"column-event-type", cols.EventType}, {"column-payload", cols.Payload},
		} {
			if r.v == "" {
				return usagef("--%s must name a column (table %s)", r.flag, q)
			}
		}
		names := map[string]bool{}
		for _, h := range cols.HeaderColumns {
			n := h.Name()
			switch {
			case slices.Contains(reservedHeaderNames, n) || strings.HasPrefix(n, "ce_") || strings.HasPrefix(n, "outbox_cdc."):
				return usagef("--header-column %s: header %q is set by outbox-cdc itself; name it COLUMN:OTHER", h.Column, n)
			case names[n]:
				return usagef("--header-column: header %q is given twice (table %s)", n, q)
			}
			names[n] = true
		}
	}
	return nil
}
