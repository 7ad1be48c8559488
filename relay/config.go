package relay

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/contract"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Config is everything one relay needs, composed of each component's own
// settings. Default returns every default; package config fills a Config
// from flags, OUTBOX_CDC_* variables and a config file, and New validates
// it (Validate) once. A setting is declared here once: the flags (whose
// names the comments give, and the config file's keys follow) take their
// defaults from Default.
type Config struct {
	// PostgresURL is the database the slot is in: a libpq URL or key=value
	// (required). TLS through sslmode, sslrootcert, sslcert and sslkey.
	PostgresURL string
	// Kafka is how the brokers are reached.
	Kafka Kafka
	// Slot is the publication and the replication slot streamed.
	Slot Slot
	// Tables are the outbox tables, each with its own mapping, route,
	// cleanup and backfill. Table builds one with Defaults' settings.
	Tables []Table
	// Messages are the transactional logical decoding messages relayed as
	// events (outbox.Writer's Emit, sql/outbox_emit.sql), routed as
	// Defaults.Route says.
	Messages Messages
	// Stream bounds what is in flight and paces the replication connection.
	Stream Stream
	// Producer is how events become Kafka records.
	Producer Producer
	// Delivery is at-least-once or exactly-once, and the latter's settings.
	Delivery Delivery
	// Topics is how topics are created, capped, and where rows that cannot
	// be published go.
	Topics Topics
	// Contracts are the JSON Schemas payloads must meet to be published.
	Contracts Contracts
	// Cleanup is what becomes of a row once its event is in Kafka.
	Cleanup cleanup.Policy
	// BackfillForce runs each table's backfill again on an existing slot,
	// in a snapshot of its own: rows it also streams are published twice.
	BackfillForce bool
	// OnSlotLost is what a lost slot makes the relay do:
	// fail (the default) or heal, which needs Cleanup.
	OnSlotLost SlotLostPolicy
	// Defaults are the per-table settings a table gets when made by
	// Table (package config's flags set them; its config file overrides
	// them per table).
	Defaults Table
}

// Kafka is how the relay reaches the brokers: TLS, SASL, both or neither.
type Kafka struct {
	Brokers []string // bootstrap brokers, host:port (required)
	// TLS turns TLS on; implied by any of TLSFiles' fields.
	TLS      bool
	TLSFiles sink.TLSFiles
	// SASL is the mechanism ("", plain, scram-sha-256 or scram-sha-512)
	// and the credentials; sink.SASL validates them.
	SASL sink.SASL
	// SASLAllowPlaintext permits SASL PLAIN without TLS, which sends the
	// password in clear; without it such a configuration is refused.
	SASLAllowPlaintext bool
}

// Slot names what the relay streams from.
type Slot struct {
	Publication string // default outbox_cdc; created when missing
	Name        string // the logical replication slot (pgoutput); default outbox_cdc
	// Failover is how a new slot is created: auto (failover-enabled on
	// PostgreSQL 17 and newer), on or off.
	Failover slot.Failover
}

// Messages are the logical decoding messages relayed as events.
type Messages struct {
	// Prefix is the messages' prefix (pg_logical_emit_message(true,
	// PREFIX, CONTENT)); default outbox; empty: none are relayed.
	Prefix string
}

// Table is one outbox table and what each component does with it.
type Table struct {
	decode.Table // schema, name and column mapping
	Route        Route
	// Mark and MarkDead are what Cleanup = mark sets on published and on
	// dead-lettered rows (cleanup.ParseSet).
	Mark, MarkDead []cleanup.Set
	// Backfill is what the backfill reads when the slot is created.
	Backfill backfill.Spec
	// Where is the table's row filter (--where): one boolean expression
	// over its own columns, such as target_broker = 'partner', that the
	// publication filters rows by (PostgreSQL 15 and newer), so that
	// relays on one outbox, each with its own slot, publication and Kafka
	// cluster, share its rows out. Empty: every row.
	Where string
}

// Route is where a table's events go: a topic template, an optional
// rewrite and allow-list, and how missing topics are created.
type Route struct {
	// Topic is the template (sink.ParseTopic); default
	// outbox.event.{aggregate_type}.
	Topic string
	// Regex and Replacement rewrite routed names that Regex matches whole
	// (RE2; $1 for a group); empty: names as routed.
	Regex, Replacement string
	// Allow is an allow-list (RE2) every routed name must match whole;
	// other events are dead-lettered (topic_not_allowed). Empty: any.
	Allow string
	// Spec is how a missing topic is created (partitions, replication
	// factor, configs; 0 and nil: the broker's defaults).
	Spec sink.TopicSpec
}

// Stream bounds the events in flight and paces the replication connection.
type Stream struct {
	MaxInFlight      int           // events published but not yet acknowledged; default 10000
	MaxInFlightBytes int64         // their payload bytes; default 64 MiB
	ConfirmInterval  time.Duration // how soon a newly acknowledged position is reported; default 20ms
	StatusInterval   time.Duration // longest gap between standby status updates; default 10s
	ReceiveTimeout   time.Duration // server silence after which the connection is presumed dead; default 30s
	// ReadPacing is the least time between two reads of the replication
	// connection while the server sends little; default 1ms; 0 reads
	// whenever data arrives (see replication.StreamConfig.ReadPacing).
	ReadPacing   time.Duration
	DrainTimeout time.Duration // how long shutdown waits for in-flight acks; default 30s
	// HeartbeatInterval is how often, while nothing is in flight, a
	// logical decoding message is written so that an idle outbox advances
	// its slot; also how often slot metrics are read. Default 10s; 0: none.
	HeartbeatInterval time.Duration
}

// Producer is how events become Kafka records.
type Producer struct {
	BatchSize           int              // most messages of one partition in one request; default 1000
	BatchTimeout        time.Duration    // least time between two requests to one broker under load; default 7ms
	MaxInFlightRequests int              // produce requests out at once per broker connection, 1 to 5; default 5
	Compression         sink.Compression // default lz4
	MaxMessageBytes     int              // largest record; larger rows are invalid; default 1,000,000
	MetadataMaxAge      time.Duration    // how long a topic's partitions are trusted; default 1m
	MissingTopicTimeout time.Duration    // how long an event waits for a missing topic; default 30s
	Envelope            sink.Envelope    // default raw
	CloudEventsSource   string           // ce_source; empty: /outbox-cdc/ and the table
	MetadataHeaders     bool             // commit LSN, xid and commit time headers
	// ConnectExpandPayload, with Envelope connect-json, sends a JSON
	// payload as JSON with an inferred schema (Debezium's
	// table.expand.json.payload) instead of as a string.
	ConnectExpandPayload bool
	// Timestamp is the records' timestamp (--timestamp): column, the
	// table's timestamp column (or the commit time when it has none), or
	// commit, the transaction's commit time, which does not go back within
	// a partition on one server (sink.TimestampCommit). Default column.
	Timestamp sink.Timestamp
}

// Topics is how topics are created and capped, and what becomes of a row
// that cannot be published.
type Topics struct {
	// Create creates a missing topic through the admin API, with its
	// route's Spec (default true).
	Create bool
	// AutoCreate is deprecated: without Create, ask the broker to create a
	// missing topic with its defaults.
	AutoCreate bool
	// Max bounds the topics routed from rows' values (sink.TopicLimit);
	// default 1000; 0: no cap.
	Max int
	// OnInvalid is what becomes of a row that cannot be published.
	OnInvalid OnInvalid
	// DeadLetterTopic receives such rows with OnInvalid = dlq; default
	// outbox.dlq. It is created as Defaults.Route.Spec says.
	DeadLetterTopic string
}

// Contracts are the payload contracts (package contract): a directory of
// JSON Schema documents, one per event type, loaded and compiled once by
// New. A payload its contract refuses is invalid (OnInvalid), with reason
// contract_violation.
type Contracts struct {
	// Dir is the directory (--contracts); empty: payloads are not checked.
	Dir string
	// Unknown is what becomes of an event whose type has no contract
	// (--contracts-unknown): allow (the default) publishes it, dead-letter
	// makes it invalid (contract_missing).
	Unknown contract.Unknown
	// Registry is where the contracts are registered, and values framed
	// with their ids (--schema-registry); empty URL: none.
	Registry Registry
}

// OnInvalid is what becomes of a row that cannot be published.
type OnInvalid string

// Values of OnInvalid.
const (
	OnInvalidDLQ  OnInvalid = "dlq"  // to the dead-letter topic, and go on
	OnInvalidFail OnInvalid = "fail" // stop without confirming it
)

// Default returns every default: what `outbox-cdc run` is with no flag, no
// variable and no config file, and the table public.outbox. Set
// PostgresURL and Kafka.Brokers, change what else you need (Table builds
// another table with Defaults' settings), and hand it to New, which
// validates it. The flags take their defaults from here.
func Default() Config {
	defaults := Table{
		Table: decode.Table{Columns: decode.Columns{
			ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", EventType: "event_type",
			Payload: "payload", Headers: "headers", Timestamp: "created_at",
			NullPayload: decode.NullPayloadDeadLetter,
		}},
		Route:    Route{Topic: "outbox.event.{aggregate_type}"},
		Backfill: backfill.Spec{Order: backfill.OrderAuto},
	}
	c := Config{
		Slot:     Slot{Publication: "outbox_cdc", Name: "outbox_cdc", Failover: slot.FailoverAuto},
		Messages: Messages{Prefix: "outbox"},
		Stream: Stream{MaxInFlight: 10000, MaxInFlightBytes: 64 << 20, ConfirmInterval: 20 * time.Millisecond,
			StatusInterval: 10 * time.Second, ReceiveTimeout: 30 * time.Second, DrainTimeout: 30 * time.Second, ReadPacing: time.Millisecond,
			HeartbeatInterval: 10 * time.Second},
		Producer: Producer{BatchSize: 1000, BatchTimeout: 7 * time.Millisecond, MaxInFlightRequests: 5, Compression: sink.CompressionLz4,
			MaxMessageBytes: 1_000_000, MetadataMaxAge: time.Minute, MissingTopicTimeout: 30 * time.Second,
			Envelope: sink.EnvelopeRaw, Timestamp: sink.TimestampColumn},
		Topics:  Topics{Create: true, AutoCreate: true, Max: 1000, OnInvalid: OnInvalidDLQ, DeadLetterTopic: "outbox.dlq"},
		Cleanup: cleanup.None, OnSlotLost: SlotLostFail,
		Delivery: defaultDelivery(),
		Defaults: defaults,
	}
	c.Contracts.Unknown = contract.UnknownAllow
	c.Tables = []Table{c.Table("public.outbox")}
	return c
}

// Table returns a table named "schema.name" (or "name", in public) with
// Defaults' mapping, route, marks and backfill.
func (c Config) Table(name string) Table {
	t := c.Defaults
	t.Schema, t.Name = "public", name
	if schema, table, ok := strings.Cut(name, "."); ok {
		t.Schema, t.Name = schema, table
	}
	return t
}

// Target is the publication, slot and tables c names, each table with the
// columns its topic template names.
func (c Config) Target() slot.Target {
	t := slot.Target{Publication: c.Slot.Publication, Slot: c.Slot.Name, Failover: c.Slot.Failover}
	for _, tc := range c.Tables {
		tb := tc.Table
		if topic, err := sink.ParseTopic(tc.Route.Topic); err == nil {
			tb.Columns.TopicColumns = topic.Columns()
		}
		t.Tables = append(t.Tables, tb)
		if tc.Where != "" {
			if t.Where == nil {
				t.Where = map[string]string{}
			}
			t.Where[tb.Qualified()] = tc.Where
		}
	}
	return t
}

// CleanupTables are c's tables as Cleanup treats them: deleted, or marked
// by their Mark and MarkDead (with Cleanup = mark only).
func (c Config) CleanupTables() []cleanup.Table {
	target := c.Target()
	out := make([]cleanup.Table, len(c.Tables))
	for i, tc := range c.Tables {
		out[i].Table = target.Tables[i]
		if c.Cleanup == cleanup.Mark {
			out[i].Mark, out[i].MarkDead = tc.Mark, tc.MarkDead
		}
	}
	return out
}

// UsesTLS says whether the brokers are reached over TLS: asked for, or
// implied by a TLS file or setting.
func (k Kafka) UsesTLS() bool { return k.TLS || k.TLSFiles != (sink.TLSFiles{}) }

// Security is what sink dials the brokers with: the TLS configuration
// (its files read now) and the SASL mechanism.
func (c Config) Security() (sink.Security, error) {
	var s sink.Security
	var err error
	k := c.Kafka
	if k.UsesTLS() {
		if s.TLS, err = sink.NewTLSConfig(k.TLSFiles); err != nil {
			return s, err
		}
	}
	s.SASL, err = producer.NewSASL(k.SASL.Mechanism, k.SASL.Username, k.SASL.Password)
	return s, err
}

// TableNames returns the outbox tables as "schema.table", comma-separated.
func (c Config) TableNames() string {
	names := make([]string, len(c.Tables))
	for i, t := range c.Tables {
		names[i] = t.Qualified()
	}
	return strings.Join(names, ",")
}

// PostgresTarget describes PostgresURL without its password, for logs:
// "user@host:port/database".
func (c Config) PostgresTarget() string {
	pc, err := pgconn.ParseConfig(c.PostgresURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", pc.User, pc.Host, pc.Port, pc.Database)
}
