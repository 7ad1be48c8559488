package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// TestConfigErrorsNameFields: a setting Validate refuses is named by its
// path in Config, as a Go program sets it, never by outbox-cdc's flag or
// variable, which a library user has never seen.
func TestConfigErrorsNameFields(t *testing.T) {
	good := relay.Default()
	good.PostgresURL, good.Kafka.Brokers = "postgres://u@127.0.0.1:1/db", []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		name, field string
		mutate      func(c *relay.Config)
		says        string // the message names this field too
	}{
		{"no postgres url", "PostgresURL", func(c *relay.Config) { c.PostgresURL = "" }, ""},
		{"a batch of nothing", "Producer.BatchSize", func(c *relay.Config) { c.Producer.BatchSize = 0 }, ""},
		{"confirm past status", "Stream.ConfirmInterval", func(c *relay.Config) { c.Stream.ConfirmInterval = time.Hour }, "Stream.StatusInterval"},
		{"a table's empty payload column", "Tables[0].Columns.Payload", func(c *relay.Config) { c.Tables[0].Columns.Payload = "" }, ""},
		{"a table's bad topic regex", "Tables[0].Route.Regex", func(c *relay.Config) { c.Tables[0].Route.Regex = "(" }, ""},
		{"a SASL user without a mechanism", "Kafka.SASL.Mechanism", func(c *relay.Config) { c.Kafka.SASL.Username = "u" }, "Kafka.SASL.Username"},
		{"SCRAM without a password", "Kafka.SASL.Password", func(c *relay.Config) { c.Kafka.SASL = sink.SASL{Mechanism: "scram-sha-512", Username: "u"} }, "Kafka.SASL.Mechanism"},
		{"a heal with nothing to read", "OnSlotLost", func(c *relay.Config) { c.OnSlotLost = relay.SlotLostHeal }, "Cleanup"},
		{"marks without mark", "Defaults.Mark", func(c *relay.Config) { c.Defaults.Mark = []cleanup.Set{{Column: "x"}} }, "Cleanup"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			c.Tables = append([]relay.Table(nil), good.Tables...)
			tt.mutate(&c)
			err := c.Validate()
			var ce *relay.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate: %v, want a *relay.ConfigError of field %s", err, tt.field)
			}
			msg := err.Error()
			if strings.Contains(msg, "--") || strings.Contains(msg, "OUTBOX_CDC_") {
				t.Errorf("%q names a flag or a variable, not a field", msg)
			}
			if !strings.Contains(msg, tt.field) || !strings.Contains(msg, tt.says) {
				t.Errorf("%q does not name %s and %q", msg, tt.field, tt.says)
			}
		})
	}
}
