package config

import (
	"flag"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/outbox-cdc/outbox-cdc/backfill"
)

// group is a set of flags shared by some commands.
type group uint16

const (
	gPostgres group = 1 << iota // --postgres-url
	gSlot                       // --table, --publication, --slot
	gColumns                    // --column-*
	gKafka                      // --kafka-brokers, TLS, SASL
	gRoute                      // --topic, --dlq-topic, --on-invalid, topic creation
	gRelay                      // the stream's tuning, --http-addr
	gLog                        // --log-format, --log-level
	gSetup                      // --role, --print
	gStatus                     // --json
	gCleanup                    // --cleanup
	gDLQ                        // the dlq commands' --dlq-topic, --reason, offsets (config/dlq.go)
)

var commandGroups = map[string]group{
	CmdRun:    gPostgres | gSlot | gColumns | gKafka | gRoute | gRelay | gLog | gCleanup,
	CmdCheck:  gPostgres | gSlot | gColumns | gKafka | gRoute | gLog | gCleanup,
	CmdSetup:  gPostgres | gSlot | gLog | gSetup | gCleanup | gKafka | gRoute,
	CmdStatus: gPostgres | gSlot | gLog | gStatus,

	CmdDLQList:   gKafka | gLog | gStatus | gDLQ,
	CmdDLQReplay: gKafka | gLog | gStatus | gDLQ,
}

var commandHelp = map[string]string{
	CmdRun:    "Streams a Postgres outbox table to Kafka through logical replication.",
	CmdCheck:  "Checks Postgres and Kafka for everything run needs, and prints the fix for each item that fails. Exit 1 if any fails.",
	CmdSetup:  "Creates the publication and the replication slot (with --backfill-where, not the slot: run creates it, exporting the snapshot the backfill reads), and grants --role what run needs (--print: only print the SQL); with --kafka-brokers, also the dead-letter topic and fixed event topics (--topic-partitions, --topic-replication-factor, --topic-config).",
	CmdStatus: "Prints where the replication slot stands: its position, the WAL it retains, wal_status, and whether a consumer streams it.",

	CmdDLQList:   dlqListHelp,
	CmdDLQReplay: dlqReplayHelp,
}

// rawFlags hold what is parsed into other fields after the flags are read.
type rawFlags struct{ brokers, table, config string }

func newFlagSet(c *Config, g group) (*flag.FlagSet, *rawFlags) {
	raw := &rawFlags{}
	fs := flag.NewFlagSet("outbox-cdc "+c.Command, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; help goes to out
	fs.Usage = func() {}

	if g&gPostgres != 0 {
		fs.StringVar(&c.PostgresURL, "postgres-url", "", "Postgres connection string, libpq URL or key=value (required); TLS through sslmode, sslrootcert, sslcert and sslkey; the replication connection adds replication=database itself")
	}
	if g&gSlot != 0 {
		fs.StringVar(&raw.table, "table", "public.outbox", "outbox tables, comma-separated, each optionally schema-qualified; one publication and one slot carry them all; empty: no table, only --message-prefix messages")
		fs.StringVar(&c.MessagePrefix, "message-prefix", "outbox", "prefix of the transactional logical decoding messages relayed as events (outbox.Writer's Emit, sql/outbox_emit.sql): pg_logical_emit_message(true, PREFIX, CONTENT), CONTENT in the encoding of docs/messages.md; they go to --topic; empty: none")
		fs.StringVar(&raw.config, "config", "", "YAML or JSON file with settings beyond flags: each table's own columns, header columns and topic (see docs/reference.md)")
		fs.StringVar(&c.Publication, "publication", "outbox_cdc", "publication carrying the outbox table's INSERTs; run creates it when missing")
		fs.StringVar(&c.Slot, "slot", "outbox_cdc", "logical replication slot (plugin pgoutput); run creates it when missing")
		fs.StringVar(&c.SlotFailover, "slot-failover", "auto", "create the slot failover-enabled, so that standbys with sync_replication_slots=on keep a copy and their promotion keeps it: auto (on PostgreSQL 17 and newer), true or false; an existing slot that should be and is not gets a warning with the fix")
	}
	if g&gColumns != 0 {
		fs.StringVar(&c.Columns.ID, "column-id", "id", "column holding the event id (sent as header id)")
		fs.StringVar(&c.Columns.AggregateType, "column-aggregate-type", "aggregate_type", "column holding the aggregate type (header aggregate_type, topic routing); empty: the table has none")
		fs.StringVar(&c.Columns.AggregateID, "column-aggregate-id", "aggregate_id", "column whose text form is the Kafka message key (the aggregate id, or any column: id keys by event); empty: the table has none, and every record has a null key")
		fs.Var(nullKey{&c.Columns.NullKey}, "null-key", "a NULL or empty key column: dead-letter (the row is invalid, see --on-invalid) or allow (a null key: records spread over partitions as the Java client spreads them)")
		fs.StringVar(&c.Columns.EventType, "column-event-type", "event_type", "column holding the event type (header event_type)")
		fs.StringVar(&c.Columns.Payload, "column-payload", "payload", "column whose value becomes the Kafka message value, byte for byte")
		fs.StringVar(&c.Columns.Headers, "column-headers", "headers", "optional jsonb column; each string member becomes a Kafka header (absent column: unused)")
		fs.StringVar(&c.Columns.Timestamp, "column-timestamp", "created_at", "optional timestamp column for the message time (absent column: commit time)")
		fs.Var(headerColumns{&c.Columns.HeaderColumns}, "header-column", "COLUMN or COLUMN:HEADER, repeatable (env: comma-separated): a further column sent as a header in its text form, such as correlation_id, tenant_id or traceparent; NULL is left out")
	}
	if g&gKafka != 0 {
		fs.StringVar(&raw.brokers, "kafka-brokers", "", "comma-separated Kafka bootstrap brokers, host:port (required)")
		fs.BoolVar(&c.Kafka.TLS, "kafka-tls", false, "connect to the brokers over TLS (implied by any other --kafka-tls-* flag)")
		fs.StringVar(&c.Kafka.CAFile, "kafka-tls-ca-file", "", "PEM file of the CA certificates that sign the brokers' certificates; empty: the system's roots")
		fs.StringVar(&c.Kafka.CertFile, "kafka-tls-cert-file", "", "PEM client certificate, for brokers that require mutual TLS (with --kafka-tls-key-file)")
		fs.StringVar(&c.Kafka.KeyFile, "kafka-tls-key-file", "", "PEM private key of --kafka-tls-cert-file")
		fs.StringVar(&c.Kafka.ServerName, "kafka-tls-server-name", "", "name expected in the brokers' certificates; empty: each broker's host")
		fs.BoolVar(&c.Kafka.InsecureSkipVerify, "kafka-tls-insecure-skip-verify", false, "accept any broker certificate (testing only: anyone on the path can read and forge traffic)")
		fs.StringVar(&c.Kafka.SASLMechanism, "kafka-sasl-mechanism", "", "SASL authentication: plain, scram-sha-256 or scram-sha-512; empty: none")
		fs.StringVar(&c.Kafka.SASLUsername, "kafka-sasl-username", "", "SASL user name")
		fs.StringVar(&c.Kafka.SASLPassword, "kafka-sasl-password", "", "SASL password; prefer OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE, never logged")
		fs.BoolVar(&c.Kafka.SASLAllowPlaintext, "kafka-sasl-allow-plaintext", false, "allow --kafka-sasl-mechanism=plain without TLS, which sends the password in clear to anyone on the path (a local test broker, say); refused otherwise. SCRAM never sends the password and needs no such permission (outbox-cdc check still warns of a plaintext listener)")
	}
	if g&gRoute != 0 {
		fs.StringVar(&c.Topic, "topic", "outbox.event.{aggregate_type}", "Kafka topic template; {aggregate_type} and {event_type} are replaced from the row, {COLUMN} by that column's text form ({topic}, {type}), anything else is literal")
		fs.StringVar(&c.TopicRegex, "topic-regex", "", "rewrite routed topic names that this regular expression (RE2) matches whole into --topic-replacement, like Debezium's route.topic.regex; empty: names as routed")
		fs.StringVar(&c.TopicReplacement, "topic-replacement", "", "what --topic-regex's matches become; $1 or ${1} stand for its groups")
		fs.StringVar(&c.TopicAllow, "topic-allow", "", "allow-list of topics: a regular expression (RE2) that every routed topic name (after --topic-regex) must match whole, such as 'outbox\\.event\\.(Order|Invoice)'; an event routed to another topic is dead-lettered (reason topic_not_allowed), so a value in a row cannot create or fill a topic of its choosing; per table in --config: topic_allow; the dead-letter topic is never refused; empty: any name, bounded only by --max-topics")
		fs.IntVar(&c.MaxTopics, "max-topics", 1000, "most distinct topics that events are routed to by their rows' values, counted from the process's start (fixed topics and the dead-letter topic are not counted); each is created when missing, and holds state in the relay and series in /metrics. An event for a further topic is dead-lettered (reason topic_limit), never dropped, while the topics in use keep working. 1000 by default: an outbox has a topic per aggregate type, usually tens, and a bug that puts user input in aggregate_type then stops at 1000 topics instead of flooding the cluster; 0: no cap")
		fs.StringVar(&c.OnInvalid, "on-invalid", OnInvalidDLQ, "a row that cannot be published (NULL or empty key, bad headers, too large, bad topic): dlq sends it to --dlq-topic and goes on; fail stops without confirming it")
		fs.StringVar(&c.DeadLetterTopic, "dlq-topic", "outbox.dlq", "dead-letter topic for --on-invalid=dlq; the reason, table, LSN and columns travel in outbox_cdc.* headers")
		fs.BoolVar(&c.CreateTopics, "create-topics", true, "create a missing topic (an event topic on first use, the dead-letter topic at start) through Kafka's admin API, with --topic-partitions, --topic-replication-factor and --topic-config, so brokers with auto.create.topics.enable=false work; one created meanwhile by another relay is fine. false: a missing topic waits --missing-topic-timeout, then its events are invalid")
		fs.IntVar(&c.TopicPartitions, "topic-partitions", 0, "partitions of a topic outbox-cdc creates; 0: the broker's num.partitions")
		fs.IntVar(&c.TopicReplication, "topic-replication-factor", 0, "replication factor of a topic outbox-cdc creates; 0: the broker's default.replication.factor. Production: 3, with --topic-config min.insync.replicas=2")
		fs.Var(&sets{dst: &c.TopicConfigs}, "topic-config", "KEY=VALUE, repeatable (env: comma-separated): a config of a topic outbox-cdc creates, such as min.insync.replicas=2, cleanup.policy=delete, retention.ms=604800000, compression.type=producer")
		fs.BoolVar(&c.AutoCreateTopics, "kafka-auto-create-topics", true, "deprecated (outbox-cdc creates topics itself, see --create-topics): with --create-topics=false, ask the broker to create a missing topic with its defaults (the broker must allow it: auto.create.topics.enable)")
	}
	if g&gRelay != 0 {
		fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:9090", "address serving /metrics (Prometheus), /healthz and /readyz; empty: no HTTP server")
		fs.IntVar(&c.MaxInFlight, "max-in-flight", 10000, "most events published but not yet acknowledged; reading the WAL pauses at this bound")
		fs.Int64Var(&c.MaxInFlightBytes, "max-in-flight-bytes", 64<<20, "most payload bytes published but not yet acknowledged")
		fs.IntVar(&c.BatchSize, "batch-size", 1000, "most messages of one partition in one produce request")
		fs.DurationVar(&c.BatchTimeout, "batch-timeout", 7*time.Millisecond, "least time between two produce requests to one broker while events keep coming, so that each carries what gathered meanwhile (the broker sees at most 1/this requests a second); a request after a quiet spell, or with a full batch, leaves at once. Lower: less latency, more broker CPU per event (measured: 5ms, 8ms, 12ms in docs/benchmarks.md)")
		fs.StringVar(&c.Compression, "kafka-compression", "lz4", "record batch compression: none, gzip, snappy, lz4 or zstd. lz4 by default: on ~300-byte JSON events it halved the bytes sent at 1,000 single-row tx/s and cut them 4x at 5,000/s and 5x in a backlog, at no CPU cost measurable in the relay or the broker; zstd and gzip send ~20-45% less again, zstd with ~30 MiB more peak memory (docs/benchmarks.md)")
		fs.DurationVar(&c.ConfirmInterval, "confirm-interval", 20*time.Millisecond, "how soon a newly acknowledged position is reported to Postgres; what a crash replays is at most this much more (each report costs the walsender a wakeup)")
		fs.DurationVar(&c.StatusInterval, "status-interval", 10*time.Second, "longest gap between standby status updates to Postgres")
		fs.DurationVar(&c.ReceiveTimeout, "receive-timeout", 30*time.Second, "server silence after which the replication connection is presumed dead and reopened (keepalives are asked for when idle)")
		fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long to wait for in-flight events to be acknowledged")
		fs.IntVar(&c.MaxMessageBytes, "max-message-bytes", 1_000_000, "largest record (key, value, headers) published; keep it at or below the topics' max.message.bytes")
		fs.DurationVar(&c.MetadataMaxAge, "kafka-metadata-max-age", time.Minute, "how long a topic's partitions and their leaders are trusted before they are asked again; a partition added to a topic is used after at most this long (a leader change is learnt at once, from the produce error)")
		fs.DurationVar(&c.MissingTopicTimeout, "missing-topic-timeout", 30*time.Second, "how long an event waits for its topic to exist before it is treated as invalid (--on-invalid)")
		fs.StringVar(&c.Envelope, "envelope", "raw", "raw: the payload as the value, id, event_type and aggregate_type headers; cloudevents: also the CloudEvents 1.0 Kafka binding's binary-mode headers (ce_id, ce_type, ce_source, ce_time, ce_specversion, content-type), payload unchanged")
		fs.StringVar(&c.CloudEventsSource, "cloudevents-source", "", "ce_source with --envelope=cloudevents, a URI-reference; empty: /outbox-cdc/ followed by the table")
		fs.BoolVar(&c.MetadataHeaders, "metadata-headers", false, "add outbox_cdc.commit_lsn, outbox_cdc.xid and outbox_cdc.commit_time headers, for consumers that order or audit by transaction")
		fs.BoolVar(&c.BackfillForce, "backfill-force", false, "run --backfill-where again on an existing slot, in a snapshot of its own: rows it finds that the slot also streams are published twice")
		fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "while nothing is in flight, write a logical decoding message this often so that an idle outbox still advances its slot; also how often slot metrics are read; 0 disables heartbeats")
	}
	if g&gLog != 0 {
		fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
		fs.StringVar(&c.LogLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	}
	if g&gSetup != 0 {
		fs.StringVar(&c.Role, "role", "", "role outbox-cdc run connects as: granted SELECT on the table (it must have LOGIN REPLICATION); empty: no grants")
		fs.BoolVar(&c.Print, "print", false, "print the SQL instead of running it")
	}
	if g&gCleanup != 0 {
		fs.StringVar(&c.Cleanup, "cleanup", CleanupNone, "none; delete-after-publish: delete each row once Kafka acknowledged its event (by the id column, which must be unique), before its position is confirmed, dead-lettered rows kept; or mark: update it instead, by --mark (and dead-lettered rows by --mark-dead)")
		fs.Var(&sets{dst: &c.Mark}, "mark", "COLUMN=VALUE, repeatable (env: comma-separated): with --cleanup=mark, what a published row's column is set to; VALUE is now(), true, false, an integer or a 'quoted string': --mark status='Published' --mark published_at=now()")
		fs.StringVar(&c.BackfillWhere, "backfill-where", "", "SQL predicate over the outbox table, such as processed_on_utc IS NULL: when run creates the slot, it first publishes every row matching it as of the slot's exported snapshot (in --backfill-order), then streams what commits after; so the rows a polling relay left pending are relayed once, none lost. Runs once per slot; progress is kept in the table outbox_cdc_backfill beside the outbox table, and a backfill cut short resumes on restart, reading exactly the rows the first snapshot saw. One boolean expression over the table's own columns: no subquery, no other table, no volatile function (checked before use); it runs with the relay's role, in a read-only transaction")
		fs.StringVar(&c.BackfillOrder, "backfill-order", "auto", "order the backfill publishes rows in, which per aggregate must follow commit order: commit (each row's commit time; needs track_commit_timestamp = on), timestamp (the timestamp column, then the id: a polling relay's order), id (the id column: ids from a sequence), or auto: commit when track_commit_timestamp is on, else timestamp when the table has that column, else refuse and ask")
		fs.Var(&sets{dst: &c.MarkDead}, "mark-dead", "COLUMN=VALUE, repeatable: with --cleanup=mark, what a dead-lettered row's column is set to; VALUE as --mark's, or reason (the dead letter's reason, such as message_too_large); none: such rows are kept as they are")
	}
	if g&gStatus != 0 {
		fs.BoolVar(&c.JSON, "json", false, "print JSON instead of text")
	}
	if g&gDLQ != 0 {
		dlqFlags(fs, c)
	}
	return fs, raw
}

// slotName is what Postgres accepts for a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// validate reports the first field that cannot work, naming the flag to fix.
func (c Config) validate(g group) error {
	if g&gPostgres != 0 && c.PostgresURL == "" && (c.Command != CmdSetup || !c.Print) {
		return usagef("--postgres-url (or %s) is required, e.g. postgres://user@127.0.0.1:5432/db", EnvName("postgres-url"))
	}
	if g&gSlot != 0 {
		if err := c.validateTables(g&gColumns != 0); err != nil {
			return err
		}
		switch {
		case c.Publication == "":
			return usagef("--publication must not be empty")
		case !slotName.MatchString(c.Slot):
			return usagef("--slot %q: a slot name is 1 to 63 characters of a-z, 0-9 and _", c.Slot)
		case c.SlotFailover != "auto" && c.SlotFailover != "true" && c.SlotFailover != "false":
			return usagef("--slot-failover %q: want auto, true or false", c.SlotFailover)
		}
	}
	if g&gKafka != 0 {
		if err := c.validateKafka(); err != nil {
			return err
		}
	}
	if g&gRoute != 0 {
		switch {
		case c.Topic == "":
			return usagef("--topic must not be empty")
		case c.OnInvalid != OnInvalidDLQ && c.OnInvalid != OnInvalidFail:
			return usagef("--on-invalid %q: want dlq or fail", c.OnInvalid)
		case c.OnInvalid == OnInvalidDLQ && c.DeadLetterTopic == "":
			return usagef("--dlq-topic must name a topic with --on-invalid=dlq")
		case c.MaxTopics < 0:
			return usagef("--max-topics %d: want 0 (no cap) or more", c.MaxTopics)
		}
		if _, err := regexp.Compile(c.TopicAllow); err != nil {
			return usagef("--topic-allow %q: %v", c.TopicAllow, err)
		}
	}
	if g&gLog != 0 {
		switch {
		case c.LogFormat != "text" && c.LogFormat != "json":
			return usagef("--log-format %q: want text or json", c.LogFormat)
		case c.LogLevel != "debug" && c.LogLevel != "info" && c.LogLevel != "warn" && c.LogLevel != "error":
			return usagef("--log-level %q: want debug, info, warn or error", c.LogLevel)
		}
	}
	if g&gRelay != 0 {
		if err := c.validateRelay(); err != nil {
			return err
		}
	}
	if g&gCleanup != 0 {
		switch {
		case c.Cleanup != CleanupNone && c.Cleanup != CleanupDeleteAfterPublish && c.Cleanup != CleanupMark:
			return usagef("--cleanup %q: want none, delete-after-publish or mark", c.Cleanup)
		case c.Cleanup == CleanupMark && !c.marks():
			return usagef("--cleanup=mark needs --mark COLUMN=VALUE (or --mark-dead), such as --mark processed_at=now()")
		case c.Cleanup != CleanupMark && (len(c.Mark) > 0 || len(c.MarkDead) > 0):
			return usagef("--mark and --mark-dead need --cleanup=mark")
		}
	}
	if g&gCleanup != 0 && c.Cleanup != CleanupNone && len(c.Tables) == 0 {
		return usagef("--cleanup %s deletes outbox rows, and --table names no table (messages leave no rows)", c.Cleanup)
	}
	if g&gRelay != 0 && c.BackfillForce && !c.backfills() {
		return usagef("--backfill-force needs --backfill-where")
	}
	if g&gCleanup != 0 {
		for _, t := range c.Tables {
			if _, err := backfill.ParseOrder(t.BackfillOrder); err != nil && t.BackfillWhere != "" {
				return usagef("%s: %v", t.Qualified(), err)
			}
			if t.BackfillWhere == "" {
				continue
			}
			if _, err := backfill.ParsePredicate(t.BackfillWhere); err != nil {
				return usagef("%s: %v", t.Qualified(), err)
			}
		}
	}
	if g&gDLQ != 0 {
		if err := c.validateDLQ(); err != nil {
			return err
		}
	}
	if g&gSetup != 0 && c.Role != "" && strings.ContainsAny(c.Role, "\"\x00") {
		return usagef("--role %q: a role name without quotes", c.Role)
	}
	return nil
}

func (c Config) validateKafka() error {
	k := c.Kafka
	if len(c.KafkaBrokers) == 0 && c.Command == CmdSetup {
		return nil // setup creates topics only when given brokers
	}
	if len(c.KafkaBrokers) == 0 {
		return usagef("--kafka-brokers (or %s) is required, e.g. 127.0.0.1:9092", EnvName("kafka-brokers"))
	}
	switch {
	case (k.CertFile == "") != (k.KeyFile == ""):
		return usagef("--kafka-tls-cert-file and --kafka-tls-key-file go together: give both or neither")
	case k.SASLMechanism != "" && k.SASLMechanism != "plain" && k.SASLMechanism != "scram-sha-256" && k.SASLMechanism != "scram-sha-512":
		return usagef("--kafka-sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", k.SASLMechanism)
	case k.SASLMechanism != "" && k.SASLUsername == "":
		return usagef("--kafka-sasl-username (or %s) is required with --kafka-sasl-mechanism", EnvName("kafka-sasl-username"))
	case k.SASLMechanism != "" && k.SASLPassword == "":
		return usagef("--kafka-sasl-password (or %s, or %s%s) is required with --kafka-sasl-mechanism",
			EnvName("kafka-sasl-password"), EnvName("kafka-sasl-password"), fileSuffix)
	case k.SASLMechanism == "" && (k.SASLUsername != "" || k.SASLPassword != ""):
		return usagef("--kafka-sasl-username and --kafka-sasl-password need --kafka-sasl-mechanism (plain, scram-sha-256 or scram-sha-512)")
	case k.SASLMechanism == "plain" && !k.TLS && !k.SASLAllowPlaintext:
		return usagef("--kafka-sasl-mechanism=plain without TLS sends the password in clear: add --kafka-tls (with --kafka-tls-ca-file) for the brokers' SASL_SSL listener, "+
			"use scram-sha-512, or say --kafka-sasl-allow-plaintext (%s=true) on a network you trust", EnvName("kafka-sasl-allow-plaintext"))
	case strings.HasPrefix(k.SASLMechanism, "scram") && !saslPrepared(k.SASLUsername):
		return usagef("--kafka-sasl-username holds a character SCRAM refuses (SASLprep, RFC 4013: a control character, say)")
	case strings.HasPrefix(k.SASLMechanism, "scram") && !saslPrepared(k.SASLPassword):
		return usagef("--kafka-sasl-password holds a character SCRAM refuses (SASLprep, RFC 4013: a control character, say)")
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

func (c Config) validateRelay() error {
	switch {
	case c.MaxInFlight < 1:
		return usagef("--max-in-flight %d: want at least 1", c.MaxInFlight)
	case c.MaxInFlightBytes < 1:
		return usagef("--max-in-flight-bytes %d: want at least 1", c.MaxInFlightBytes)
	case c.BatchSize < 1:
		return usagef("--batch-size %d: want at least 1", c.BatchSize)
	case c.BatchTimeout <= 0:
		return usagef("--batch-timeout %s: want a positive duration such as 5ms", c.BatchTimeout)
	case c.Compression != "none" && c.Compression != "gzip" && c.Compression != "snappy" && c.Compression != "lz4" && c.Compression != "zstd":
		return usagef("--kafka-compression %q: want none, gzip, snappy, lz4 or zstd", c.Compression)
	case c.StatusInterval <= 0 || c.StatusInterval > time.Minute:
		return usagef("--status-interval %s: want between 1ms and 1m (Postgres drops a silent client after wal_sender_timeout)", c.StatusInterval)
	case c.ConfirmInterval <= 0 || c.ConfirmInterval > c.StatusInterval:
		return usagef("--confirm-interval %s: want a positive duration up to --status-interval (%s)", c.ConfirmInterval, c.StatusInterval)
	case c.ReceiveTimeout < 0:
		return usagef("--receive-timeout %s: want a positive duration, or 0 for 3 × --status-interval", c.ReceiveTimeout)
	case c.DrainTimeout < 0:
		return usagef("--drain-timeout %s: want zero or more", c.DrainTimeout)
	case c.MaxMessageBytes < 1024:
		return usagef("--max-message-bytes %d: want at least 1024", c.MaxMessageBytes)
	case c.MetadataMaxAge < time.Second:
		return usagef("--kafka-metadata-max-age %s: want at least 1s", c.MetadataMaxAge)
	case c.MissingTopicTimeout < 0:
		return usagef("--missing-topic-timeout %s: want zero or more", c.MissingTopicTimeout)
	case c.HeartbeatInterval < 0:
		return usagef("--heartbeat-interval %s: want a positive duration, or 0 to disable", c.HeartbeatInterval)
	case c.HTTPAddr != "" && !strings.Contains(c.HTTPAddr, ":"):
		return usagef("--http-addr %q: want host:port, such as 127.0.0.1:9090 or :9090", c.HTTPAddr)
	case c.Envelope != "raw" && c.Envelope != "cloudevents":
		return usagef("--envelope %q: want raw or cloudevents", c.Envelope)
	}
	if c.CloudEventsSource != "" {
		if _, err := url.Parse(c.CloudEventsSource); err != nil || strings.ContainsAny(c.CloudEventsSource, " \t\n") {
			return usagef("--cloudevents-source %q: want a URI-reference such as /orders or urn:example:orders", c.CloudEventsSource)
		}
	}
	return nil
}
