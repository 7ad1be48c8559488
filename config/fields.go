package config

import (
	"errors"
	"regexp"
	"slices"

	"github.com/outbox-cdc/outbox-cdc/internal/configerr"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// fieldFlags maps each setting of relay.Config, by its path, to the flag
// that sets it (whose name is also its OUTBOX_CDC_ variable's and its
// config file key's: EnvName, fileKey). A table's own settings are under
// Defaults: the flags set Defaults, and a config file's tables[i] sets
// Tables[i] by the same keys. "": no flag (derived, or set through
// another). TestEveryFieldHasAFlag walks relay.Config: a setting missing
// here fails it.
var fieldFlags = map[string]string{
	"PostgresURL":                          "postgres-url",
	"Kafka.Brokers":                        "kafka-brokers",
	"Kafka.TLS":                            "kafka-tls",
	"Kafka.TLSFiles.CAFile":                "kafka-tls-ca-file",
	"Kafka.TLSFiles.CertFile":              "kafka-tls-cert-file",
	"Kafka.TLSFiles.KeyFile":               "kafka-tls-key-file",
	"Kafka.TLSFiles.ServerName":            "kafka-tls-server-name",
	"Kafka.TLSFiles.InsecureSkipVerify":    "kafka-tls-insecure-skip-verify",
	"Kafka.SASL.Mechanism":                 "kafka-sasl-mechanism",
	"Kafka.SASL.Username":                  "kafka-sasl-username",
	"Kafka.SASL.Password":                  "kafka-sasl-password",
	"Kafka.SASLAllowPlaintext":             "kafka-sasl-allow-plaintext",
	"Slot.Publication":                     "publication",
	"Slot.Name":                            "slot",
	"Slot.Failover":                        "slot-failover",
	"Tables":                               "table",
	"Messages.Prefix":                      "message-prefix",
	"Stream.MaxInFlight":                   "max-in-flight",
	"Stream.MaxInFlightBytes":              "max-in-flight-bytes",
	"Stream.ConfirmInterval":               "confirm-interval",
	"Stream.StatusInterval":                "status-interval",
	"Stream.ReceiveTimeout":                "receive-timeout",
	"Stream.ReadPacing":                    "read-pacing",
	"Stream.DrainTimeout":                  "drain-timeout",
	"Stream.HeartbeatInterval":             "heartbeat-interval",
	"Producer.BatchSize":                   "batch-size",
	"Producer.BatchTimeout":                "batch-timeout",
	"Producer.MaxInFlightRequests":         "max-in-flight-requests",
	"Producer.Compression":                 "kafka-compression",
	"Producer.MaxMessageBytes":             "max-message-bytes",
	"Producer.MetadataMaxAge":              "kafka-metadata-max-age",
	"Producer.MissingTopicTimeout":         "missing-topic-timeout",
	"Producer.Envelope":                    "envelope",
	"Producer.CloudEventsSource":           "cloudevents-source",
	"Producer.MetadataHeaders":             "metadata-headers",
	"Producer.ConnectExpandPayload":        "connect-expand-payload",
	"Producer.Timestamp":                   "timestamp",
	"Delivery.Mode":                        "delivery",
	"Delivery.TransactionalID":             "transactional-id",
	"Delivery.CheckpointTopic":             "checkpoint-topic",
	"Delivery.CheckpointReplicationFactor": "checkpoint-replication-factor",
	"Delivery.TransactionInterval":         "transaction-interval",
	"Delivery.TransactionTimeout":          "transaction-timeout",
	"Topics.Create":                        "create-topics",
	"Topics.AutoCreate":                    "kafka-auto-create-topics",
	"Topics.Max":                           "max-topics",
	"Topics.OnInvalid":                     "on-invalid",
	"Topics.DeadLetterTopic":               "dlq-topic",
	"Contracts.Dir":                        "contracts",
	"Contracts.Unknown":                    "contracts-unknown",
	"Contracts.Registry.URL":               "schema-registry",
	"Contracts.Registry.User":              "schema-registry-user",
	"Contracts.Registry.Password":          "schema-registry-password",
	"Contracts.Registry.CAFile":            "schema-registry-ca-file",
	"Contracts.Registry.CertFile":          "schema-registry-cert-file",
	"Contracts.Registry.KeyFile":           "schema-registry-key-file",
	"Cleanup":                              "cleanup",
	"BackfillForce":                        "backfill-force",
	"OnSlotLost":                           "on-slot-lost",

	"Defaults.Schema":                       "", // --table names the tables
	"Defaults.Name":                         "",
	"Defaults.OID":                          "", // learnt from the server
	"Defaults.Columns.ID":                   "column-id",
	"Defaults.Columns.AggregateType":        "column-aggregate-type",
	"Defaults.Columns.AggregateID":          "column-aggregate-id",
	"Defaults.Columns.EventType":            "column-event-type",
	"Defaults.Columns.Payload":              "column-payload",
	"Defaults.Columns.Headers":              "column-headers",
	"Defaults.Columns.Timestamp":            "column-timestamp",
	"Defaults.Columns.HeaderColumns":        "header-column",
	"Defaults.Columns.TopicColumns":         "", // read from --topic's template
	"Defaults.Columns.NullKey":              "null-key",
	"Defaults.Columns.NullPayload":          "null-payload",
	"Defaults.Columns.Partition":            "column-partition",
	"Defaults.Route.Topic":                  "topic",
	"Defaults.Route.Regex":                  "topic-regex",
	"Defaults.Route.Replacement":            "topic-replacement",
	"Defaults.Route.Allow":                  "topic-allow",
	"Defaults.Route.Spec.Partitions":        "topic-partitions",
	"Defaults.Route.Spec.ReplicationFactor": "topic-replication-factor",
	"Defaults.Route.Spec.Configs":           "topic-config",
	"Defaults.Mark":                         "mark",
	"Defaults.MarkDead":                     "mark-dead",
	"Defaults.Backfill.Where":               "backfill-where",
	"Defaults.Backfill.RowFilter":           "", // --where's, set by the relay
	"Defaults.Backfill.Order":               "backfill-order",
	"Defaults.Where":                        "where",
}

// secretFlags are passwords, best read from a file through their _FILE
// variable, which messages asking for them name too.
var secretFlags = []string{"kafka-sasl-password", "schema-registry-password"}

// tableIndex is a table's place in a field path: each table's settings
// are Defaults' flags.
var tableIndex = regexp.MustCompile(`^Tables\[\d+\]\.`)

// flagOf is the flag of the setting at path; "" when it has none.
func flagOf(path string) string {
	return fieldFlags[tableIndex.ReplaceAllString(path, "Defaults.")]
}

// flagName names a setting a relay.ConfigError refers to as the user gives
// it: its flag, with its variable when the message asks for the setting.
func flagName(r configerr.Ref) string {
	name := flagOf(r.Field)
	if name == "" {
		return configerr.GoName(r)
	}
	env := EnvName(name)
	switch {
	case r.Sources && r.Value != "":
		return "--" + name + " (" + env + "=" + r.Value + ")"
	case r.Sources && slices.Contains(secretFlags, name):
		return "--" + name + " (or " + env + ", or " + env + fileSuffix + ")"
	case r.Sources:
		return "--" + name + " (or " + env + ")"
	case r.Value != "":
		return "--" + name + "=" + r.Value
	}
	return "--" + name
}

// Explain is err, said in terms of flags when it holds a relay.ConfigError
// (a setting relay.New or a command found wrong): a *UsageError whose
// message is err's with that error's Config fields named by their flags,
// and which unwraps to err. Any other error is returned as it is.
func Explain(err error) error {
	var ce *relay.ConfigError
	var ue *UsageError
	if err == nil || errors.As(err, &ue) || !errors.As(err, &ce) {
		return err
	}
	return &UsageError{Field: flagOf(ce.Field), Msg: replaceLast(err.Error(), ce.Error(), ce.Render(flagName)), err: err}
}

// replaceLast is s with its last old (the innermost error's message, which
// wrappers prefix) replaced by new; new alone when s lacks old.
func replaceLast(s, old, new string) string {
	i := len(s) - len(old)
	for ; i >= 0 && s[i:i+len(old)] != old; i-- {
	}
	if i < 0 {
		return new
	}
	return s[:i] + new + s[i+len(old):]
}
