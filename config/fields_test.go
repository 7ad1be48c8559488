package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

// settings are the paths of relay.Config's settings (fields that are not
// structs of settings; an embedded struct's fields are promoted, and a
// table's own settings are Defaults'), walked by reflection.
func settings(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		path := prefix + f.Name
		if f.Anonymous {
			path = strings.TrimSuffix(prefix, ".")
		}
		if f.Type.Kind() == reflect.Struct {
			p := path + "."
			if path == "" {
				p = ""
			}
			out = append(out, settings(f.Type, p)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// TestEveryFieldHasAFlag: every setting of relay.Config, which a
// relay.ConfigError may name (relay's TestConfigErrorsNameRealFields), is
// in fieldFlags, with the flag that really sets it; so a field added to
// relay.Config without its line there fails here, and the CLI never
// prints a Go path where a flag belongs.
func TestEveryFieldHasAFlag(t *testing.T) {
	paths := settings(reflect.TypeOf(relay.Config{}), "")
	if len(paths) < 60 {
		t.Fatalf("walked %d settings of relay.Config, want its 80 or so: %q", len(paths), paths)
	}
	for _, p := range paths {
		if _, ok := fieldFlags[p]; !ok {
			t.Errorf("relay.Config's %s is not in fieldFlags: add it with its flag (or \"\" if none sets it)", p)
		}
	}
	for p, name := range fieldFlags {
		if !contains(paths, p) {
			t.Errorf("fieldFlags has %s, which relay.Config has not", p)
			continue
		}
		if name == "" || p == "Tables" { // --table is read into Tables after the flags
			continue
		}
		if err := flagSets(p, name); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// flagSets checks that setting flag name changes the field at path.
func flagSets(path, name string) error {
	c := defaults(CmdRun)
	f := newFlags(&c)
	if f.fs.Lookup(name) == nil {
		return fmt.Errorf("no flag --%s", name)
	}
	field := func() reflect.Value {
		v := reflect.ValueOf(c.Relay)
		for _, n := range strings.Split(path, ".") {
			v = v.FieldByName(n)
		}
		return v
	}
	before := fmt.Sprint(field().Interface())
	for _, value := range []string{"probe", "true", "false", "7", "3s", "a=1", "allow"} {
		if f.fs.Set(name, value) == nil && fmt.Sprint(field().Interface()) != before {
			return nil
		}
	}
	return fmt.Errorf("--%s does not set it", name)
}

// TestCLISaysRelayErrorsInFlags: a relay.ConfigError, from Parse or from
// relay.New later (through Explain), names the flags the user typed, and
// keeps its place in a wrapping error's message.
func TestCLISaysRelayErrorsInFlags(t *testing.T) {
	good := relay.Default()
	good.PostgresURL, good.Kafka.Brokers = "postgres://u@h/db", []string{"k:1"}
	for _, tt := range []struct {
		name   string
		mutate func(c *relay.Config)
		flag   string
		says   string
	}{
		{"a setting and another", func(c *relay.Config) { c.Stream.ConfirmInterval = time.Hour },
			"confirm-interval", "--confirm-interval 1h0m0s: want a positive duration up to --status-interval (10s)"},
		{"a table's setting", func(c *relay.Config) { c.Tables[0].Columns.Payload = "" },
			"column-payload", "--column-payload must name a column (table public.outbox)"},
		{"a setting asked for, with its variables", func(c *relay.Config) { c.Kafka.SASL.Mechanism, c.Kafka.SASL.Username = "plain", "u" },
			"kafka-sasl-password", "--kafka-sasl-password (or OUTBOX_CDC_KAFKA_SASL_PASSWORD, or OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE) is required with --kafka-sasl-mechanism"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			c.Tables = append([]relay.Table(nil), good.Tables...)
			tt.mutate(&c)
			err := Explain(fmt.Errorf("start: %w", c.Validate()))
			var ue *UsageError
			var ce *relay.ConfigError
			if !errors.As(err, &ue) || ue.Field != tt.flag || err.Error() != "start: "+tt.says || !errors.As(err, &ce) {
				t.Errorf("Explain: %v (%#v), want a UsageError of %s saying %q and unwrapping to the relay.ConfigError", err, ue, tt.flag, "start: "+tt.says)
			}
		})
	}
	if err := errors.New("other"); Explain(err) != err {
		t.Error("Explain changed an error holding no relay.ConfigError")
	}
}
