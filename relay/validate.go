package relay

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/configerr"
	"github.com/outbox-cdc/outbox-cdc/internal/redact"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// ConfigError is a setting that cannot work, found before any I/O: its
// Field is the setting's path in Config, such as Producer.BatchSize or
// Tables[1].Columns.ID, and its message names that and any other setting
// by their paths too. Package config says the same in terms of its flags
// (cmd/outbox-cdc exits 2 on it).
type ConfigError = configerr.Error

// bad is the error of field, a path relative to the type whose method
// calls it (a caller holding that type makes it its own with
// configerr.In); format writes settings as {Path} (see configerr.New).
func bad(field, format string, args ...any) error {
	return configerr.New(field, format, args...)
}

// Part is a part of a Config that Validate checks. A program that uses
// only some (outbox-cdc status reads the slot and never Kafka) validates
// those with ValidateParts.
type Part uint16

// Parts, in the order they are checked.
const (
	PartPostgres Part = 1 << iota // PostgresURL
	PartSlot                      // Slot, Messages.Prefix, the tables' names
	PartTables                    // each table's mapping, route and marks
	PartKafka                     // Kafka
	PartTopics                    // Topics, and the route of messages (Defaults.Route); Contracts
	PartStream                    // Stream, Producer, BackfillForce
	PartCleanup                   // Cleanup, each table's backfill
	PartAll      = PartPostgres | PartSlot | PartTables | PartKafka | PartTopics | PartStream | PartCleanup
)

// Validate reports the first setting that cannot work, as a *ConfigError
// naming its field. New calls it.
func (c Config) Validate() error { return c.ValidateParts(PartAll) }

// ValidateParts is Validate for the parts p names.
func (c Config) ValidateParts(p Part) error {
	checks := []struct {
		part  Part
		check func() error
	}{
		{PartPostgres, c.validatePostgres}, {PartSlot, c.validateSlot}, {PartTables, c.validateTables},
		{PartKafka, in("Kafka", c.Kafka.validate)}, {PartTopics, c.validateTopics}, {PartStream, c.validateStream},
		{PartCleanup, c.validateCleanup}, {PartCleanup, c.validateSlotLost}, {PartTopics, in("Contracts", c.Contracts.validate)},
		{PartTopics, c.validateRegistry}, {PartKafka, in("Delivery", c.Delivery.validate)}, {PartKafka, c.validateCheckpointTopic},
		{PartTopics, c.validateReserved},
	}
	for _, ch := range checks {
		if p&ch.part == 0 {
			continue
		}
		if err := ch.check(); err != nil {
			return err
		}
	}
	return nil
}

// in is check, its error's field seen from Config, where check's receiver
// is at path.
func in(path string, check func() error) func() error {
	return func() error { return configerr.In(path, check()) }
}

// tablePath is the path of Config's i-th table.
func tablePath(i int) string { return fmt.Sprintf("Tables[%d]", i) }

func (c Config) validatePostgres() error {
	if c.PostgresURL == "" {
		return bad("PostgresURL", "{*PostgresURL} is required, e.g. postgres://user@127.0.0.1:5432/db")
	}
	// Parsed as the driver will parse it at connect time, so that check
	// --offline calls valid only what run can use; but without the files
	// it names (TLS certificates and keys, a service file), which are the
	// connecting machine's: check --offline runs in CI or on a laptop.
	// pgconn's error names the fault with the password already blanked;
	// redact is a belt.
	if _, err := pgconn.ParseConfig(withoutFiles(c.PostgresURL)); err != nil {
		return bad("PostgresURL", "{PostgresURL} cannot be parsed: %s", redact.String(err.Error()))
	}
	return nil
}

// slotName is what Postgres accepts for a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func (c Config) validateSlot() error {
	prefix := c.Messages.Prefix
	switch {
	case len(c.Tables) == 0 && prefix == "":
		return bad("Tables", "{Tables}: name at least one outbox table, or relay messages alone with {Tables} '' and a {Messages.Prefix}")
	case prefix == decode.HeartbeatPrefix:
		return bad("Messages.Prefix", "{Messages.Prefix} %q is outbox-cdc's heartbeat prefix; choose another", prefix)
	case strings.ContainsRune(prefix, 0):
		return bad("Messages.Prefix", "{Messages.Prefix} must not contain a NUL byte")
	}
	seen := map[string]bool{}
	for _, t := range c.Tables {
		q := t.Qualified()
		switch {
		case t.Schema == "" || t.Name == "" || strings.Contains(t.Name, "."):
			return bad("Tables", "{Tables} %q: want table or schema.table", q)
		case seen[q]:
			return bad("Tables", "{Tables}: %s is listed twice", q)
		}
		seen[q] = true
	}
	s := c.Slot
	switch {
	case s.Publication == "":
		return bad("Slot.Publication", "{Slot.Publication} must not be empty")
	case !slotName.MatchString(s.Name):
		return bad("Slot.Name", "{Slot.Name} %q: a slot name is 1 to 63 characters of a-z, 0-9 and _", s.Name)
	case s.Failover != slot.FailoverAuto && s.Failover != slot.FailoverOn && s.Failover != slot.FailoverOff:
		return bad("Slot.Failover", "{Slot.Failover} %q: want auto, true or false", s.Failover)
	}
	return nil
}

// reservedHeaderNames are set by outbox-cdc itself.
var reservedHeaderNames = []string{"id", "event_type", "aggregate_type", "content-type"}

func (c Config) validateTables() error {
	if len(c.Tables) == 0 && c.Defaults.Where != "" {
		return bad("Defaults.Where", "{Defaults.Where} filters an outbox table's rows, and {Tables} names no table (messages are never filtered)")
	}
	for i, t := range c.Tables {
		if err := t.validate(); err != nil {
			return configerr.In(tablePath(i), err)
		}
	}
	return nil
}

// validate checks a route's topic creation, rewrite and allow-list, and
// that sink can build it; of is "table SCHEMA.NAME" or "messages".
func (r Route) validate(of string) error {
	s := r.Spec
	if s.Partitions < 0 || s.ReplicationFactor < 0 {
		return bad("Spec.Partitions", "{Spec.Partitions} and {Spec.ReplicationFactor} (%s): want 0 (the broker's default) or more", of)
	}
	for k := range s.Configs {
		if k == "" {
			return bad("Spec.Configs", "{Spec.Configs} (%s): a config with no key; want KEY=VALUE, such as min.insync.replicas=2", of)
		}
	}
	if r.Regex != "" {
		if _, err := regexp.Compile(r.Regex); err != nil {
			return bad("Regex", "{Regex} %q (%s): %w", r.Regex, of, err)
		}
	}
	if _, err := regexp.Compile(r.Allow); err != nil {
		return bad("Allow", "{Allow} %q (%s): %w", r.Allow, of, err)
	}
	if _, err := r.topic(); err != nil {
		return bad("Topic", "{Topic} (%s): %w", of, err)
	}
	return nil
}

// topic is what sink routes by.
func (r Route) topic() (sink.Topic, error) {
	topic, err := sink.ParseTopic(r.Topic)
	if err == nil {
		topic, err = topic.Rewrite(r.Regex, r.Replacement)
	}
	if err == nil {
		topic, err = topic.Allow(r.Allow)
	}
	return topic, err
}

// validate checks the brokers, TLS and SASL; SASL's own settings are
// sink.SASL's to judge.
func (k Kafka) validate() error {
	if len(k.Brokers) == 0 {
		return bad("Brokers", "{*Brokers} is required, e.g. 127.0.0.1:9092")
	}
	if (k.TLSFiles.CertFile == "") != (k.TLSFiles.KeyFile == "") {
		return bad("TLSFiles.CertFile", "{TLSFiles.CertFile} and {TLSFiles.KeyFile} go together: give both or neither")
	}
	if err := k.SASL.Validate(); err != nil {
		return configerr.In("SASL", err)
	}
	if k.SASL.Mechanism == "plain" && !k.UsesTLS() && !k.SASLAllowPlaintext {
		return bad("SASL.Mechanism", "{SASL.Mechanism=plain} without TLS sends the password in clear: add {TLS} (with {TLSFiles.CAFile}) for the brokers' SASL_SSL listener, "+
			"use scram-sha-512, or say {*SASLAllowPlaintext=true} on a network you trust")
	}
	return nil
}

func (c Config) validateTopics() error {
	t := c.Topics
	switch {
	case c.Defaults.Route.Topic == "":
		return bad("Defaults.Route.Topic", "{Defaults.Route.Topic} must not be empty")
	case t.OnInvalid != OnInvalidDLQ && t.OnInvalid != OnInvalidFail:
		return bad("Topics.OnInvalid", "{Topics.OnInvalid} %q: want dlq or fail", t.OnInvalid)
	case t.OnInvalid == OnInvalidDLQ && t.DeadLetterTopic == "":
		return bad("Topics.DeadLetterTopic", "{Topics.DeadLetterTopic} must name a topic with {Topics.OnInvalid=dlq}")
	case t.Max < 0:
		return bad("Topics.Max", "{Topics.Max} %d: want 0 (no cap) or more", t.Max)
	}
	if err := c.Defaults.Route.validate("messages"); err != nil {
		return configerr.In("Defaults.Route", err)
	}
	if t.OnInvalid == OnInvalidDLQ {
		if err := sink.ValidateTopicName(t.DeadLetterTopic); err != nil {
			return bad("Topics.DeadLetterTopic", "{Topics.DeadLetterTopic}: %w", err)
		}
	}
	return nil
}

func (c Config) validateStream() error {
	s, p := c.Stream, c.Producer
	switch {
	case s.MaxInFlight < 1:
		return bad("Stream.MaxInFlight", "{Stream.MaxInFlight} %d: want at least 1", s.MaxInFlight)
	case s.MaxInFlightBytes < 1:
		return bad("Stream.MaxInFlightBytes", "{Stream.MaxInFlightBytes} %d: want at least 1", s.MaxInFlightBytes)
	case p.BatchSize < 1:
		return bad("Producer.BatchSize", "{Producer.BatchSize} %d: want at least 1", p.BatchSize)
	case p.BatchTimeout <= 0:
		return bad("Producer.BatchTimeout", "{Producer.BatchTimeout} %s: want a positive duration such as 5ms", p.BatchTimeout)
	case p.MaxInFlightRequests < 1 || p.MaxInFlightRequests > 5:
		return bad("Producer.MaxInFlightRequests", "{Producer.MaxInFlightRequests} %d: want 1 to 5 (a broker recognises a batch sent twice only among the last 5 of a partition)", p.MaxInFlightRequests)
	case !slices.Contains([]sink.Compression{sink.CompressionNone, sink.CompressionGzip, sink.CompressionSnappy, sink.CompressionLz4, sink.CompressionZstd}, p.Compression):
		return bad("Producer.Compression", "{Producer.Compression} %q: want none, gzip, snappy, lz4 or zstd", p.Compression)
	case s.StatusInterval <= 0 || s.StatusInterval > time.Minute:
		return bad("Stream.StatusInterval", "{Stream.StatusInterval} %s: want between 1ms and 1m (Postgres drops a silent client after wal_sender_timeout)", s.StatusInterval)
	case s.ConfirmInterval <= 0 || s.ConfirmInterval > s.StatusInterval:
		return bad("Stream.ConfirmInterval", "{Stream.ConfirmInterval} %s: want a positive duration up to {Stream.StatusInterval} (%s)", s.ConfirmInterval, s.StatusInterval)
	case s.ReceiveTimeout < 0:
		return bad("Stream.ReceiveTimeout", "{Stream.ReceiveTimeout} %s: want a positive duration, or 0 for 3 × {Stream.StatusInterval}", s.ReceiveTimeout)
	case s.ReadPacing < 0 || s.ReadPacing > maxReadPacing:
		return bad("Stream.ReadPacing", "{Stream.ReadPacing} %s: want 0 (off) up to %s", s.ReadPacing, maxReadPacing)
	case s.DrainTimeout < 0:
		return bad("Stream.DrainTimeout", "{Stream.DrainTimeout} %s: want zero or more", s.DrainTimeout)
	case s.HeartbeatInterval < 0:
		return bad("Stream.HeartbeatInterval", "{Stream.HeartbeatInterval} %s: want a positive duration, or 0 to disable", s.HeartbeatInterval)
	}
	if err := p.validate(); err != nil {
		return configerr.In("Producer", err)
	}
	if c.BackfillForce && !c.backfills() {
		return bad("BackfillForce", "{BackfillForce} needs {Defaults.Backfill.Where}")
	}
	return nil
}

// validate checks the producer's settings that Validate's stream checks
// leave.
func (p Producer) validate() error {
	switch {
	case p.MaxMessageBytes < 1024:
		return bad("MaxMessageBytes", "{MaxMessageBytes} %d: want at least 1024", p.MaxMessageBytes)
	case p.MetadataMaxAge < time.Second:
		return bad("MetadataMaxAge", "{MetadataMaxAge} %s: want at least 1s", p.MetadataMaxAge)
	case p.MissingTopicTimeout < 0:
		return bad("MissingTopicTimeout", "{MissingTopicTimeout} %s: want zero or more", p.MissingTopicTimeout)
	case p.Envelope.Validate() != nil:
		return bad("Envelope", "{Envelope} %s", p.Envelope.Validate())
	case p.ConnectExpandPayload && p.Envelope != sink.EnvelopeConnectJSON:
		return bad("ConnectExpandPayload", "{ConnectExpandPayload} needs {Envelope=connect-json}")
	case p.Timestamp != sink.TimestampColumn && p.Timestamp != sink.TimestampCommit:
		return bad("Timestamp", "{Timestamp} %q: want column or commit", p.Timestamp)
	}
	if src := p.CloudEventsSource; src != "" {
		if _, err := url.Parse(src); err != nil || strings.ContainsAny(src, " \t\n") {
			return bad("CloudEventsSource", "{CloudEventsSource} %q: want a URI-reference such as /orders or urn:example:orders", src)
		}
	}
	return nil
}

func (c Config) validateCleanup() error {
	switch {
	case c.Cleanup != cleanup.None && c.Cleanup != cleanup.DeleteAfterPublish && c.Cleanup != cleanup.Mark:
		return bad("Cleanup", "{Cleanup} %q: want none, delete-after-publish or mark", c.Cleanup)
	case c.Cleanup == cleanup.Mark && !c.marks():
		return bad("Defaults.Mark", "{Cleanup=mark} needs {Defaults.Mark} COLUMN=VALUE (or {Defaults.MarkDead}), such as {Defaults.Mark} processed_at=now()")
	case c.Cleanup != cleanup.Mark && (len(c.Defaults.Mark) > 0 || len(c.Defaults.MarkDead) > 0):
		return bad("Defaults.Mark", "{Defaults.Mark} and {Defaults.MarkDead} need {Cleanup=mark}")
	case c.Cleanup != cleanup.None && len(c.Tables) == 0:
		return bad("Cleanup", "{Cleanup} %s deletes outbox rows, and {Tables} names no table (messages leave no rows)", c.Cleanup)
	}
	for i, t := range c.Tables {
		if err := t.validateBackfill(); err != nil {
			return configerr.In(tablePath(i), err)
		}
	}
	return nil
}

// marks reports whether some table has something to mark.
func (c Config) marks() bool {
	return slices.ContainsFunc(c.Tables, func(t Table) bool { return len(t.Mark) > 0 || len(t.MarkDead) > 0 })
}

// backfills reports whether some table has a backfill.
func (c Config) backfills() bool {
	return slices.ContainsFunc(c.Tables, func(t Table) bool { return t.Backfill.Where != "" })
}

// maxReadPacing bounds Stream.ReadPacing: each read may wait this long, so
// it is latency added to every event of a quiet stream.
const maxReadPacing = 50 * time.Millisecond
