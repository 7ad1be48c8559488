package relay

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/predicate"
	"github.com/outbox-cdc/outbox-cdc/internal/redact"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// ConfigError is a setting that cannot work, found before any I/O. Its
// message names the flag to fix (the config file's key is the flag's name
// with _ for -; the Config field's comment names it too): cmd/outbox-cdc
// exits 2 on it.
type ConfigError struct {
	Field string // the flag's name, such as max-in-flight; empty: several
	Msg   string
}

func (e *ConfigError) Error() string { return e.Msg }

func bad(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// envName is the variable of a flag, for messages: outbox-cdc's flags and
// OUTBOX_CDC_* variables are the names users know these settings by.
func envName(flag string) string {
	return "OUTBOX_CDC_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
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
// naming the flag to fix. New calls it.
func (c Config) Validate() error { return c.ValidateParts(PartAll) }

// ValidateParts is Validate for the parts p names.
func (c Config) ValidateParts(p Part) error {
	checks := []struct {
		part  Part
		check func() error
	}{
		{PartPostgres, c.validatePostgres}, {PartSlot, c.validateSlot}, {PartTables, c.validateTables},
		{PartKafka, c.Kafka.validate}, {PartTopics, c.validateTopics}, {PartStream, c.validateStream},
		{PartCleanup, c.validateCleanup}, {PartCleanup, c.validateSlotLost}, {PartTopics, c.Contracts.validate}, {PartTopics, c.validateRegistry},
		{PartKafka, c.Delivery.validate}, {PartKafka, c.validateCheckpointTopic}, {PartTopics, c.validateReserved},
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

func (c Config) validatePostgres() error {
	if c.PostgresURL == "" {
		return bad("postgres-url", "--postgres-url (or %s) is required, e.g. postgres://user@127.0.0.1:5432/db", envName("postgres-url"))
	}
	// Parsed as the driver will parse it at connect time, so that check
	// --offline calls valid only what run can use; but without the files
	// it names (TLS certificates and keys, a service file), which are the
	// connecting machine's: check --offline runs in CI or on a laptop.
	// pgconn's error names the fault with the password already blanked;
	// redact is a belt.
	if _, err := pgconn.ParseConfig(withoutFiles(c.PostgresURL)); err != nil {
		return bad("postgres-url", "--postgres-url cannot be parsed: %s", redact.String(err.Error()))
	}
	return nil
}

// slotName is what Postgres accepts for a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func (c Config) validateSlot() error {
	prefix := c.Messages.Prefix
	switch {
	case len(c.Tables) == 0 && prefix == "":
		return bad("table", "--table: name at least one outbox table, or relay messages alone with --table '' and a --message-prefix")
	case prefix == decode.HeartbeatPrefix:
		return bad("message-prefix", "--message-prefix %q is outbox-cdc's heartbeat prefix; choose another", prefix)
	case strings.ContainsRune(prefix, 0):
		return bad("message-prefix", "--message-prefix must not contain a NUL byte")
	}
	seen := map[string]bool{}
	for _, t := range c.Tables {
		q := t.Qualified()
		switch {
		case t.Schema == "" || t.Name == "" || strings.Contains(t.Name, "."):
			return bad("table", "--table %q: want table or schema.table", q)
		case seen[q]:
			return bad("table", "--table: %s is listed twice", q)
		}
		seen[q] = true
	}
	s := c.Slot
	switch {
	case s.Publication == "":
		return bad("publication", "--publication must not be empty")
	case !slotName.MatchString(s.Name):
		return bad("slot", "--slot %q: a slot name is 1 to 63 characters of a-z, 0-9 and _", s.Name)
	case s.Failover != slot.FailoverAuto && s.Failover != slot.FailoverOn && s.Failover != slot.FailoverOff:
		return bad("slot-failover", "--slot-failover %q: want auto, true or false", s.Failover)
	}
	return nil
}

// reservedHeaderNames are set by outbox-cdc itself.
var reservedHeaderNames = []string{"id", "event_type", "aggregate_type", "content-type"}

func (c Config) validateTables() error {
	if len(c.Tables) == 0 && c.Defaults.Where != "" {
		return bad("where", "--where filters an outbox table's rows, and --table names no table (messages are never filtered)")
	}
	for _, t := range c.Tables {
		if err := t.validate(); err != nil {
			return err
		}
		if t.Where == "" {
			continue
		}
		if _, err := predicate.Parse("--where", t.Where); err != nil {
			return bad("where", "%s: %v", t.Qualified(), err)
		}
	}
	return nil
}

// validate checks one table's mapping, route and marks.
func (t Table) validate() error {
	q := t.Qualified()
	if t.Route.Topic == "" {
		return bad("topic", "table %s: the topic must not be empty", q)
	}
	for _, m := range [][]cleanup.Set{t.Mark, t.MarkDead} {
		if i := slices.IndexFunc(m, func(s cleanup.Set) bool { return s.Column == "" }); i >= 0 {
			return bad("mark", "--mark and --mark-dead (table %s): a value set on no column; parse them with cleanup.ParseSet", q)
		}
	}
	if err := t.Route.validate("table " + q); err != nil {
		return err
	}
	cols := t.Columns
	for _, r := range []struct{ flag, v string }{
		{"column-id", cols.ID}, {"column-event-type", cols.EventType}, {"column-payload", cols.Payload},
	} {
		if r.v == "" {
			return bad(r.flag, "--%s must name a column (table %s)", r.flag, q)
		}
	}
	switch np := cols.NullPayload; {
	case np != "" && np != decode.NullPayloadDeadLetter && np != decode.NullPayloadTombstone:
		return bad("null-payload", "--null-payload %q (table %s): want dead-letter or tombstone", np, q)
	case np == decode.NullPayloadTombstone && cols.AggregateID == "":
		return bad("null-payload", "--null-payload=tombstone (table %s): the table has no key column (--column-aggregate-id), and a tombstone without a key deletes nothing", q)
	}
	names := map[string]bool{}
	for _, h := range cols.HeaderColumns {
		n := h.Name()
		switch {
		case h.Column == "":
			return bad("header-column", "--header-column %q: want COLUMN or COLUMN:HEADER (table %s)", ":"+h.Header, q)
		case slices.Contains(reservedHeaderNames, n) || strings.HasPrefix(n, "ce_") || strings.HasPrefix(n, "outbox_cdc."):
			return bad("header-column", "--header-column %s: header %q is set by outbox-cdc itself; name it COLUMN:OTHER", h.Column, n)
		case names[n]:
			return bad("header-column", "--header-column: header %q is given twice (table %s)", n, q)
		}
		names[n] = true
	}
	return nil
}

// validate checks a route's topic creation, rewrite and allow-list, and
// that sink can build it; of is "table SCHEMA.NAME" or "messages".
func (r Route) validate(of string) error {
	s := r.Spec
	if s.Partitions < 0 || s.ReplicationFactor < 0 {
		return bad("topic-partitions", "--topic-partitions and --topic-replication-factor (%s): want 0 (the broker's default) or more", of)
	}
	for k := range s.Configs {
		if k == "" {
			return bad("topic-config", "--topic-config (%s): a config with no key; want KEY=VALUE, such as min.insync.replicas=2", of)
		}
	}
	if r.Regex != "" {
		if _, err := regexp.Compile(r.Regex); err != nil {
			return bad("topic-regex", "--topic-regex %q (%s): %v", r.Regex, of, err)
		}
	}
	if _, err := regexp.Compile(r.Allow); err != nil {
		return bad("topic-allow", "--topic-allow %q (%s): %v", r.Allow, of, err)
	}
	if _, err := r.topic(); err != nil {
		return bad("topic", "--topic (%s): %v", of, err)
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

func (k Kafka) validate() error {
	if len(k.Brokers) == 0 {
		return bad("kafka-brokers", "--kafka-brokers (or %s) is required, e.g. 127.0.0.1:9092", envName("kafka-brokers"))
	}
	m := k.SASLMechanism
	switch {
	case (k.TLSFiles.CertFile == "") != (k.TLSFiles.KeyFile == ""):
		return bad("kafka-tls-cert-file", "--kafka-tls-cert-file and --kafka-tls-key-file go together: give both or neither")
	case m != "" && m != "plain" && m != "scram-sha-256" && m != "scram-sha-512":
		return bad("kafka-sasl-mechanism", "--kafka-sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", m)
	case m != "" && k.SASLUsername == "":
		return bad("kafka-sasl-username", "--kafka-sasl-username (or %s) is required with --kafka-sasl-mechanism", envName("kafka-sasl-username"))
	case m != "" && k.SASLPassword == "":
		return bad("kafka-sasl-password", "--kafka-sasl-password (or %s, or %s_FILE) is required with --kafka-sasl-mechanism",
			envName("kafka-sasl-password"), envName("kafka-sasl-password"))
	case m == "" && (k.SASLUsername != "" || k.SASLPassword != ""):
		return bad("kafka-sasl-mechanism", "--kafka-sasl-username and --kafka-sasl-password need --kafka-sasl-mechanism (plain, scram-sha-256 or scram-sha-512)")
	case m == "plain" && !k.UsesTLS() && !k.SASLAllowPlaintext:
		return bad("kafka-sasl-mechanism", "--kafka-sasl-mechanism=plain without TLS sends the password in clear: add --kafka-tls (with --kafka-tls-ca-file) for the brokers' SASL_SSL listener, "+
			"use scram-sha-512, or say --kafka-sasl-allow-plaintext (%s=true) on a network you trust", envName("kafka-sasl-allow-plaintext"))
	case strings.HasPrefix(string(m), "scram") && !saslPrepared(k.SASLUsername):
		return bad("kafka-sasl-username", "--kafka-sasl-username holds a character SCRAM refuses (SASLprep, RFC 4013: a control character, say)")
	case strings.HasPrefix(string(m), "scram") && !saslPrepared(k.SASLPassword):
		return bad("kafka-sasl-password", "--kafka-sasl-password holds a character SCRAM refuses (SASLprep, RFC 4013: a control character, say)")
	}
	return nil
}

// saslPrepared reports whether SCRAM accepts s as a user name or password.
// Asked here so that the refusal does not quote s, as the SCRAM library's
// own error does.
func saslPrepared(s string) bool {
	_, err := scram.Mechanism(scram.SHA256, "user", s) // a password is prepared as a user name is
	return err == nil
}

func (c Config) validateTopics() error {
	t := c.Topics
	switch {
	case c.Defaults.Route.Topic == "":
		return bad("topic", "--topic must not be empty")
	case t.OnInvalid != OnInvalidDLQ && t.OnInvalid != OnInvalidFail:
		return bad("on-invalid", "--on-invalid %q: want dlq or fail", t.OnInvalid)
	case t.OnInvalid == OnInvalidDLQ && t.DeadLetterTopic == "":
		return bad("dlq-topic", "--dlq-topic must name a topic with --on-invalid=dlq")
	case t.Max < 0:
		return bad("max-topics", "--max-topics %d: want 0 (no cap) or more", t.Max)
	}
	if err := c.Defaults.Route.validate("messages"); err != nil {
		return err
	}
	if t.OnInvalid == OnInvalidDLQ {
		if err := sink.ValidateTopicName(t.DeadLetterTopic); err != nil {
			return bad("dlq-topic", "--dlq-topic: %v", err)
		}
	}
	return nil
}

func (c Config) validateStream() error {
	s, p := c.Stream, c.Producer
	switch {
	case s.MaxInFlight < 1:
		return bad("max-in-flight", "--max-in-flight %d: want at least 1", s.MaxInFlight)
	case s.MaxInFlightBytes < 1:
		return bad("max-in-flight-bytes", "--max-in-flight-bytes %d: want at least 1", s.MaxInFlightBytes)
	case p.BatchSize < 1:
		return bad("batch-size", "--batch-size %d: want at least 1", p.BatchSize)
	case p.BatchTimeout <= 0:
		return bad("batch-timeout", "--batch-timeout %s: want a positive duration such as 5ms", p.BatchTimeout)
	case p.MaxInFlightRequests < 1 || p.MaxInFlightRequests > 5:
		return bad("max-in-flight-requests", "--max-in-flight-requests %d: want 1 to 5 (a broker recognises a batch sent twice only among the last 5 of a partition)", p.MaxInFlightRequests)
	case !slices.Contains([]sink.Compression{sink.CompressionNone, sink.CompressionGzip, sink.CompressionSnappy, sink.CompressionLz4, sink.CompressionZstd}, p.Compression):
		return bad("kafka-compression", "--kafka-compression %q: want none, gzip, snappy, lz4 or zstd", p.Compression)
	case s.StatusInterval <= 0 || s.StatusInterval > time.Minute:
		return bad("status-interval", "--status-interval %s: want between 1ms and 1m (Postgres drops a silent client after wal_sender_timeout)", s.StatusInterval)
	case s.ConfirmInterval <= 0 || s.ConfirmInterval > s.StatusInterval:
		return bad("confirm-interval", "--confirm-interval %s: want a positive duration up to --status-interval (%s)", s.ConfirmInterval, s.StatusInterval)
	case s.ReceiveTimeout < 0:
		return bad("receive-timeout", "--receive-timeout %s: want a positive duration, or 0 for 3 × --status-interval", s.ReceiveTimeout)
	case s.DrainTimeout < 0:
		return bad("drain-timeout", "--drain-timeout %s: want zero or more", s.DrainTimeout)
	case s.HeartbeatInterval < 0:
		return bad("heartbeat-interval", "--heartbeat-interval %s: want a positive duration, or 0 to disable", s.HeartbeatInterval)
	}
	return c.validateProducer()
}

func (c Config) validateProducer() error {
	p := c.Producer
	switch {
	case p.MaxMessageBytes < 1024:
		return bad("max-message-bytes", "--max-message-bytes %d: want at least 1024", p.MaxMessageBytes)
	case p.MetadataMaxAge < time.Second:
		return bad("kafka-metadata-max-age", "--kafka-metadata-max-age %s: want at least 1s", p.MetadataMaxAge)
	case p.MissingTopicTimeout < 0:
		return bad("missing-topic-timeout", "--missing-topic-timeout %s: want zero or more", p.MissingTopicTimeout)
	case !slices.Contains([]sink.Envelope{sink.EnvelopeRaw, sink.EnvelopeCloudEvents, sink.EnvelopeCloudEventsStructured, sink.EnvelopeConnectJSON}, p.Envelope):
		return bad("envelope", "--envelope %q: want raw, cloudevents, cloudevents-structured or connect-json", p.Envelope)
	case p.ConnectExpandPayload && p.Envelope != sink.EnvelopeConnectJSON:
		return bad("connect-expand-payload", "--connect-expand-payload needs --envelope=connect-json")
	case p.Timestamp != sink.TimestampColumn && p.Timestamp != sink.TimestampCommit:
		return bad("timestamp", "--timestamp %q: want column or commit", p.Timestamp)
	case c.BackfillForce && !c.backfills():
		return bad("backfill-force", "--backfill-force needs --backfill-where")
	}
	if src := p.CloudEventsSource; src != "" {
		if _, err := url.Parse(src); err != nil || strings.ContainsAny(src, " \t\n") {
			return bad("cloudevents-source", "--cloudevents-source %q: want a URI-reference such as /orders or urn:example:orders", src)
		}
	}
	return nil
}

func (c Config) validateCleanup() error {
	switch {
	case c.Cleanup != cleanup.None && c.Cleanup != cleanup.DeleteAfterPublish && c.Cleanup != cleanup.Mark:
		return bad("cleanup", "--cleanup %q: want none, delete-after-publish or mark", c.Cleanup)
	case c.Cleanup == cleanup.Mark && !c.marks():
		return bad("mark", "--cleanup=mark needs --mark COLUMN=VALUE (or --mark-dead), such as --mark processed_at=now()")
	case c.Cleanup != cleanup.Mark && (len(c.Defaults.Mark) > 0 || len(c.Defaults.MarkDead) > 0):
		return bad("mark", "--mark and --mark-dead need --cleanup=mark")
	case c.Cleanup != cleanup.None && len(c.Tables) == 0:
		return bad("cleanup", "--cleanup %s deletes outbox rows, and --table names no table (messages leave no rows)", c.Cleanup)
	}
	for _, t := range c.Tables {
		if t.Backfill.Where == "" {
			continue
		}
		if _, err := backfill.ParseOrder(string(t.Backfill.Order)); err != nil {
			return bad("backfill-order", "%s: %v", t.Qualified(), err)
		}
		if _, err := backfill.ParsePredicate(t.Backfill.Where); err != nil {
			return bad("backfill-where", "%s: %v", t.Qualified(), err)
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
