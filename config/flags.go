package config

import (
	"flag"
	"io"
	"time"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/contract"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// group is a set of flags shared by some commands, and a heading of
// --help.
type group uint32

const (
	gFile     group = 1 << iota // --config
	gPostgres                   // --postgres-url
	gSlot                       // --table, --publication, --slot, --message-prefix
	gColumns                    // --column-*, --header-column, --null-key
	gKafka                      // --kafka-brokers, TLS, SASL
	gRoute                      // --topic, the dead-letter topic, topic creation
	gStream                     // the stream's and the producer's tuning
	gCleanup                    // --cleanup, --mark, the backfill
	gLog                        // --log-format, --log-level, --http-addr
	gSetup                      // --role, --print
	gOutput                     // --json
	gCheck                      // --offline
	gDLQ                        // the dlq commands' --reason and offsets (config/dlq.go)
	gReplay                     // dlq replay's --to-topic, --dry-run
	// gAdmit are run's settings that admit a topic (sink.Admission):
	// dlq replay takes them too, to admit each dead letter as run did.
	gAdmit
)

// runGroups are run's flags; check, setup and status accept them all, so
// that a run command line can be reused for them, and ignore those they
// have no use for.
const runGroups = gFile | gPostgres | gSlot | gColumns | gKafka | gRoute | gStream | gCleanup | gLog

var commandGroups = map[string]group{
	CmdRun:    runGroups,
	CmdCheck:  gCheck | runGroups,
	CmdSetup:  gSetup | runGroups,
	CmdStatus: gOutput | runGroups,

	CmdDLQList:   gDLQ | gOutput | gFile | gKafka | gLog,
	CmdDLQReplay: gDLQ | gReplay | gAdmit | gOutput | gFile | gKafka | gLog,
}

// flags are every flag of every command, bound to one Config, and what
// --help and the config file need to know of each.
type flags struct {
	fs     *flag.FlagSet
	groups map[string]group
	order  []string // declaration order, which --help follows within a group
	// layer is the source being read: 0 the defaults, then the config
	// file, the environment and the command line. A repeatable flag's
	// source replaces the one before (see list).
	layer int
	raw   struct{ table, config string } // parsed after the flags are read
}

// newFlags defines every flag on c. Each takes its default from c, which
// is defaults(): relay.Default() for the relay's settings.
func newFlags(c *Config) *flags {
	f := &flags{fs: flag.NewFlagSet("outbox-cdc "+c.Command, flag.ContinueOnError), groups: map[string]group{}}
	f.fs.SetOutput(io.Discard) // errors are returned; help goes to out
	f.fs.Usage = func() {}
	f.raw.table = c.Relay.TableNames()
	r := &c.Relay
	f.str(gFile, &f.raw.config, "config", "YAML or JSON file holding any setting below, under the flag's name with _ for - (kafka_brokers: [a:9092, b:9092]), and tables: a list of tables, each with its own settings (see docs/reference.md and docs/config.schema.json); a flag or variable wins over the file")
	f.str(gPostgres, &r.PostgresURL, "postgres-url", "Postgres connection string, libpq URL or key=value (required); TLS through sslmode, sslrootcert, sslcert and sslkey; the replication connection adds replication=database itself")
	slotFlags(f, r)
	f.value(gCleanup, enum[cleanup.Policy]{&r.Cleanup}, "cleanup", "none; delete-after-publish: delete each row once Kafka acknowledged its event (exactly-once: once its Kafka transaction committed) (by the id column, which must be unique), before its position is confirmed, dead-lettered rows kept; or mark: update it instead, by --mark (and dead-lettered rows by --mark-dead)")
	tableFlags(f, &r.Defaults, true)
	f.value(gCleanup, enum[relay.SlotLostPolicy]{&r.OnSlotLost}, "on-slot-lost", "what a lost replication slot (dropped, invalidated by max_slot_wal_keep_size or idle_replication_slot_timeout, or absent after a failover without slot sync or a restore) makes run do: fail stops and says how to recover by hand (the default: a heal publishes some events again); heal drops the lost slot, creates it anew and publishes from its snapshot every row --cleanup has not deleted or marked, then streams, so no row is lost: rows published but not yet cleaned when the slot was lost are published again (in exactly-once, only those of the last Kafka transaction committed), logged and counted (outbox_cdc_slot_heal_rows_total); needs --cleanup delete-after-publish or mark (with --mark). Logical decoding messages of the lost range are in no table and cannot be healed")
	f.boolean(gCleanup, &r.BackfillForce, "backfill-force", "run --backfill-where again on an existing slot, in a snapshot of its own: rows it finds that the slot also streams are published twice")
	kafkaFlags(f, &r.Kafka)
	topicFlags(f, &r.Topics)
	contractFlags(f, &r.Contracts)
	streamFlags(f, &r.Stream)
	producerFlags(f, &r.Producer)
	deliveryFlags(f, &r.Delivery)
	f.str(gLog, &c.LogFormat, "log-format", "log format: text or json")
	f.str(gLog, &c.LogLevel, "log-level", "least severe level logged: debug, info, warn or error")
	f.integer(gLog, &c.MaxProcs, "max-procs", "run: processors Go schedules the relay's goroutines on (GOMAXPROCS). The relay is one pipeline of a few goroutines that wake each other; with more processors, idle ones spin looking for work at each wake-up: at 1,000-5,000 single-row tx/s on 2 cores, 1 cut the relay's CPU per event by 10-30% with no loss of drain or latency (docs/benchmarks.md). 0 leaves Go's default (the CPUs the process may use); a GOMAXPROCS variable wins over both")
	f.str(gLog, &c.HTTPAddr, "http-addr", "run: address serving /metrics (Prometheus), /healthz and /readyz; empty: no HTTP server")
	f.str(gSetup, &c.Role, "role", "role outbox-cdc run connects as: granted SELECT on the table (it must have LOGIN REPLICATION); empty: no grants")
	f.boolean(gSetup, &c.Print, "print", "print the SQL instead of running it")
	f.boolean(gOutput, &c.JSON, "json", "print JSON instead of text")
	f.boolean(gCheck, &c.Offline, "offline", "validate the configuration (flags, environment and --config file) and contact no server: exit 0 and say it is valid, or 2 and say what to fix")
	dlqFlags(f, c)
	return f
}

func slotFlags(f *flags, r *relay.Config) {
	f.str(gSlot, &f.raw.table, "table", "outbox tables, comma-separated, each optionally schema-qualified; one publication and one slot carry them all; empty: no table, only --message-prefix messages")
	f.str(gSlot, &r.Messages.Prefix, "message-prefix", "prefix of the transactional logical decoding messages relayed as events (outbox.Writer's Emit, sql/outbox_emit.sql): pg_logical_emit_message(true, PREFIX, CONTENT), CONTENT in the encoding of docs/messages.md; they go to --topic; empty: none")
	f.str(gSlot, &r.Slot.Publication, "publication", "publication carrying the outbox table's INSERTs; run creates it when missing")
	f.str(gSlot, &r.Slot.Name, "slot", "logical replication slot (plugin pgoutput); run creates it when missing")
	f.value(gSlot, enum[slot.Failover]{&r.Slot.Failover}, "slot-failover", "create the slot failover-enabled, so that standbys with sync_replication_slots=on keep a copy and their promotion keeps it: auto (on PostgreSQL 17 and newer), true or false; an existing slot that should be and is not gets a warning with the fix")
}

func kafkaFlags(f *flags, k *relay.Kafka) {
	f.value(gKafka, brokers{&k.Brokers}, "kafka-brokers", "comma-separated Kafka bootstrap brokers, host:port (required)")
	f.boolean(gKafka, &k.TLS, "kafka-tls", "connect to the brokers over TLS (implied by any other --kafka-tls-* flag)")
	f.str(gKafka, &k.TLSFiles.CAFile, "kafka-tls-ca-file", "PEM file of the CA certificates that sign the brokers' certificates; empty: the system's roots")
	f.str(gKafka, &k.TLSFiles.CertFile, "kafka-tls-cert-file", "PEM client certificate, for brokers that require mutual TLS (with --kafka-tls-key-file)")
	f.str(gKafka, &k.TLSFiles.KeyFile, "kafka-tls-key-file", "PEM private key of --kafka-tls-cert-file")
	f.str(gKafka, &k.TLSFiles.ServerName, "kafka-tls-server-name", "name expected in the brokers' certificates; empty: each broker's host")
	f.boolean(gKafka, &k.TLSFiles.InsecureSkipVerify, "kafka-tls-insecure-skip-verify", "accept any broker certificate (testing only: anyone on the path can read and forge traffic)")
	f.value(gKafka, enum[sink.SASLMechanism]{&k.SASL.Mechanism}, "kafka-sasl-mechanism", "SASL authentication: plain, scram-sha-256 or scram-sha-512; empty: none")
	f.str(gKafka, &k.SASL.Username, "kafka-sasl-username", "SASL user name")
	f.str(gKafka, &k.SASL.Password, "kafka-sasl-password", "SASL password; prefer OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE, never logged")
	f.boolean(gKafka, &k.SASLAllowPlaintext, "kafka-sasl-allow-plaintext", "allow --kafka-sasl-mechanism=plain without TLS, which sends the password in clear to anyone on the path (a local test broker, say); refused otherwise. SCRAM never sends the password and needs no such permission (outbox-cdc check still warns of a plaintext listener)")
}

func topicFlags(f *flags, t *relay.Topics) {
	f.integer(gRoute|gAdmit, &t.Max, "max-topics", "most distinct topics that events are routed to by their rows' values, counted from the process's start (fixed topics and the dead-letter topic are not counted); each is created when missing, and holds state in the relay and series in /metrics. An event for a further topic is dead-lettered (reason topic_limit), never dropped, while the topics in use keep working. 1000 by default: an outbox has a topic per aggregate type, usually tens, and a bug that puts user input in aggregate_type then stops at 1000 topics instead of flooding the cluster; 0: no cap")
	f.value(gRoute, enum[relay.OnInvalid]{&t.OnInvalid}, "on-invalid", "a row that cannot be published (NULL or empty key, bad headers, too large, bad topic): dlq sends it to --dlq-topic and goes on; fail stops without confirming it")
	f.str(gRoute|gDLQ, &t.DeadLetterTopic, "dlq-topic", "dead-letter topic: run sends it what --on-invalid=dlq refuses (the reason, table, LSN and columns travel in outbox_cdc.* headers); the dlq commands read it. No event is ever routed to it (reason topic_not_allowed), whatever --topic and --topic-allow say, also with --on-invalid=fail")
	f.boolean(gRoute, &t.Create, "create-topics", "create a missing topic (an event topic on first use, the dead-letter topic at start) through Kafka's admin API, with --topic-partitions, --topic-replication-factor and --topic-config, so brokers with auto.create.topics.enable=false work; one created meanwhile by another relay is fine. false: a missing topic waits --missing-topic-timeout, then its events are invalid")
	f.boolean(gRoute, &t.AutoCreate, "kafka-auto-create-topics", "deprecated (outbox-cdc creates topics itself, see --create-topics): with --create-topics=false, ask the broker to create a missing topic with its defaults (the broker must allow it: auto.create.topics.enable)")
}

func contractFlags(f *flags, c *relay.Contracts) {
	f.str(gRoute, &c.Dir, "contracts", "directory of payload contracts: JSON Schema documents (draft 2020-12 unless $schema says otherwise), EVENT_TYPE.json for each event type, or an index.yaml mapping event types to files (docs/reference.md); each event's payload, a message's too, is validated against its type's contract before it is published, and one that fails, or is not JSON, is invalid (--on-invalid) with reason contract_violation and the failing location in the outbox_cdc.contract_error header. Compiled once at start: a schema that does not compile, or a $ref that would need the network, stops the relay (exit 2) naming the file; check lists each. Empty: payloads are not checked")
	f.value(gRoute, enum[contract.Unknown]{&c.Unknown}, "contracts-unknown", "an event type with no contract in --contracts: allow publishes it unchecked; dead-letter makes it invalid (--on-invalid) with reason contract_missing")
	registryFlags(f, &c.Registry)
}

func registryFlags(f *flags, g *relay.Registry) {
	f.str(gRoute, &g.URL, "schema-registry", "base URL of a Confluent-compatible schema registry API (Confluent, Karapace, Apicurio's http://HOST:8080/apis/ccompat/v7), needs --contracts and --envelope=raw: each contract is registered (schemaType JSON, the document byte for byte as its file holds it: the registry reads a contract without $schema as its own default draft, draft-07 for Confluent's) on its first use under the subject <topic>-<event type>, as TopicRecordNameStrategy names it, since one topic carries several event types; the value of an event whose type has a contract is then 0x00, the schema id (4 bytes, big-endian) and the payload unchanged, which Confluent's and Apicurio's deserializers read; an event type without a contract (--contracts-unknown=allow) and a tombstone are sent unframed. A registry that does not answer (or answers 5xx) holds publishing back until it does, nothing lost or reordered; a contract it refuses (409 incompatible, 422 invalid) makes that topic's events of the type invalid (--on-invalid) with reason schema_registry_refused and its answer in the outbox_cdc.schema_registry_error header. Empty: values unframed")
	f.str(gRoute, &g.User, "schema-registry-user", "basic auth user of --schema-registry (with --schema-registry-password)")
	f.str(gRoute, &g.Password, "schema-registry-password", "basic auth password of --schema-registry; prefer OUTBOX_CDC_SCHEMA_REGISTRY_PASSWORD_FILE, never logged")
	f.str(gRoute, &g.CAFile, "schema-registry-ca-file", "PEM file of the CA certificates that sign the registry's certificate, for an https:// --schema-registry; empty: the system's roots")
	f.str(gRoute, &g.CertFile, "schema-registry-cert-file", "PEM client certificate, for a registry that requires mutual TLS (with --schema-registry-key-file; https:// only)")
	f.str(gRoute, &g.KeyFile, "schema-registry-key-file", "PEM private key of --schema-registry-cert-file")
}

func streamFlags(f *flags, s *relay.Stream) {
	f.integer(gStream, &s.MaxInFlight, "max-in-flight", "most events published but not yet acknowledged; reading the WAL pauses at this bound")
	f.fs.Int64Var(&s.MaxInFlightBytes, "max-in-flight-bytes", s.MaxInFlightBytes, "most payload bytes published but not yet acknowledged")
	f.add(gStream, "max-in-flight-bytes")
	f.duration(gStream, &s.ConfirmInterval, "confirm-interval", "how soon a newly acknowledged position is reported to Postgres; what a crash replays is at most this much more (each report costs the walsender a wakeup)")
	f.duration(gStream, &s.StatusInterval, "status-interval", "longest gap between standby status updates to Postgres")
	f.duration(gStream, &s.ReceiveTimeout, "receive-timeout", "server silence after which the replication connection is presumed dead and reopened (keepalives are asked for when idle)")
	f.duration(gStream, &s.ReadPacing, "read-pacing", "least time between two reads of the replication connection while Postgres sends little, so that one wake-up reads what a few transactions sent. On Linux the pause waits on the socket with its low-water mark at 4 KiB, so the walsender's segments do not wake the relay one by one, and ends early once that much came; a pause in which nothing came lowers the mark until data flows again, so an idle stream costs no wake-ups. At 5,000 single-row tx/s, 1ms took the relay from 2.5 to 1.0 context switches and from 38 to 30 us of CPU per event against no pacing's 44-50, for up to 1ms of latency per read (docs/benchmarks.md); 0 reads whenever data arrives; a backlog is read without pause either way")
	f.duration(gStream, &s.DrainTimeout, "drain-timeout", "on SIGTERM, how long to wait for in-flight events to be acknowledged")
	f.duration(gStream, &s.HeartbeatInterval, "heartbeat-interval", "while nothing is in flight, write a logical decoding message this often so that an idle outbox still advances its slot; also how often slot metrics are read; 0 disables heartbeats")
}

func producerFlags(f *flags, p *relay.Producer) {
	f.integer(gStream, &p.BatchSize, "batch-size", "most messages of one partition in one produce request")
	f.integer(gStream, &p.MaxInFlightRequests, "max-in-flight-requests", "produce requests out at once on each broker's connection, 1 to 5, as the Java producer's max.in.flight.requests.per.connection: while a request is out, another leaves only with a full batch (a backlog), and a partition's batches out at once keep their order (the broker writes them by sequence, and a failure sends them again one at a time). 1: one request at a time")
	f.duration(gStream, &p.BatchTimeout, "batch-timeout", "least time between two produce requests to one broker while events keep coming, so that each carries what gathered meanwhile (the broker sees at most 1/this requests a second); a request after a quiet spell, or with a full batch, leaves at once. Lower: less latency, more broker CPU per event (measured: 5ms, 8ms, 12ms in docs/benchmarks.md). In exactly-once delivery it is at least --transaction-interval: records are invisible until the commit, which sends what gathered at once")
	f.value(gStream, enum[sink.Compression]{&p.Compression}, "kafka-compression", "record batch compression: none, gzip, snappy, lz4 or zstd. lz4 by default: on ~300-byte JSON events it halved the bytes sent at 1,000 single-row tx/s and cut them 4x at 5,000/s and 5x in a backlog, at no CPU cost measurable in the relay or the broker; zstd and gzip send ~20-45% less again, zstd with ~30 MiB more peak memory (docs/benchmarks.md)")
	f.integer(gStream, &p.MaxMessageBytes, "max-message-bytes", "largest record (key, value, headers) published; keep it at or below the topics' max.message.bytes")
	f.duration(gStream, &p.MetadataMaxAge, "kafka-metadata-max-age", "how long a topic's partitions and their leaders are trusted before they are asked again; a partition added to a topic is used after at most this long (a leader change is learnt at once, from the produce error)")
	f.duration(gStream, &p.MissingTopicTimeout, "missing-topic-timeout", "how long an event waits for its topic to exist before it is treated as invalid (--on-invalid)")
	f.value(gStream, enum[sink.Envelope]{&p.Envelope}, "envelope", "raw: the payload as the value, id, event_type and aggregate_type headers; cloudevents: also the CloudEvents 1.0 Kafka binding's binary-mode headers (ce_id, ce_type, ce_source, ce_time, ce_specversion, content-type), payload unchanged; cloudevents-structured: the value is a CloudEvents 1.0 JSON document (structured mode, header content-type: application/cloudevents+json) whose data is the payload as JSON when it is JSON (a json or jsonb column, or a text or bytea one holding an object or array), a JSON string for other text, else data_base64; connect-json: the value is Kafka Connect's JsonConverter format with schemas.enable=true, a struct of id, aggregate_type, aggregate_id, event_type, payload (a string; bytes for binary) and timestamp, for sink connectors (the key stays the aggregate id: key.converter StringConverter). Both keep raw's headers; a tombstone stays a null value")
	f.boolean(gStream, &p.ConnectExpandPayload, "connect-expand-payload", "with --envelope=connect-json, send a JSON payload as JSON with a schema inferred from it (objects as structs, arrays of one element type, int64, float64 (JsonConverter: double), string, boolean; null as an optional string), as Debezium's table.expand.json.payload does, instead of as a string; a payload whose schema cannot be inferred (an empty or mixed array, a duplicate or empty key, nesting past 64) goes as a string")
	f.str(gStream, &p.CloudEventsSource, "cloudevents-source", "ce_source with --envelope=cloudevents (source with cloudevents-structured), a URI-reference; empty: /outbox-cdc/ followed by the table")
	f.boolean(gStream, &p.MetadataHeaders, "metadata-headers", "add outbox_cdc.commit_lsn, outbox_cdc.xid and outbox_cdc.commit_time headers, for consumers that order or audit by transaction")
	f.value(gStream, enum[sink.Timestamp]{&p.Timestamp}, "timestamp", "record timestamp: column, the --column-timestamp column (or the commit time if the table has none), whose now() is fixed when the writer's transaction starts and can go back within a partition when an earlier-started transaction commits later; or commit, the transaction's commit time as Postgres reports it, which does not go back within a partition on one server (it can after the server's clock is stepped back, or after a failover to a server whose clock is behind). Rows a backfill publishes carry its start time under commit")
}

// The flags' definers: each takes its default from what p holds.

func (f *flags) add(g group, name string) {
	f.groups[name] = g
	f.order = append(f.order, name)
}

func (f *flags) str(g group, p *string, name, usage string) {
	f.fs.StringVar(p, name, *p, usage)
	f.add(g, name)
}

func (f *flags) boolean(g group, p *bool, name, usage string) {
	f.fs.BoolVar(p, name, *p, usage)
	f.add(g, name)
}

func (f *flags) integer(g group, p *int, name, usage string) {
	f.fs.IntVar(p, name, *p, usage)
	f.add(g, name)
}

func (f *flags) duration(g group, p *time.Duration, name, usage string) {
	f.fs.DurationVar(p, name, *p, usage)
	f.add(g, name)
}

func (f *flags) value(g group, v flag.Value, name, usage string) {
	f.fs.Var(v, name, usage)
	f.add(g, name)
}

// command is a flag set of the flags in groups, sharing f's values.
func (f *flags) command(groups group) *flag.FlagSet {
	fs := flag.NewFlagSet(f.fs.Name(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, name := range f.order {
		if f.groups[name]&groups != 0 {
			fl := f.fs.Lookup(name)
			fs.Var(fl.Value, name, fl.Usage)
		}
	}
	return fs
}

func deliveryFlags(f *flags, d *relay.Delivery) {
	f.value(gStream, enum[relay.DeliveryMode]{&d.Mode}, "delivery", "at-least-once: an idempotent producer writes a retried batch once, but events published and not yet confirmed to Postgres are published again after a crash, so consumers drop duplicates by the id header; exactly-once: whole Postgres transactions go into Kafka transactions, each with a checkpoint record in --checkpoint-topic, and the slot is confirmed after the Kafka commit: a consumer with isolation.level=read_committed sees each event once, and each Postgres transaction's events all at once, across crashes and takeovers (docs/exactly-once.md)")
	f.str(gStream, &d.TransactionalID, "transactional-id", "exactly-once: the Kafka transactional id; every instance of one slot must share it, so that the one holding the slot fences the one before it; empty: outbox-cdc.<system identifier>.<slot> (the Postgres cluster's, which its physical standbys share)")
	f.str(gStream|gAdmit, &d.CheckpointTopic, "checkpoint-topic", "exactly-once: the compacted topic the relay creates and writes each Kafka transaction's last Postgres transaction to, one record key per slot; at start the relay skips what it holds. No event is ever routed to it (reason topic_not_allowed), in at-least-once delivery too: a later switch to exactly-once reads what it holds")
	f.integer(gStream, &d.CheckpointReplicationFactor, "checkpoint-replication-factor", "exactly-once: replication factor of --checkpoint-topic when the relay creates it (min.insync.replicas one less, at least 1); 0: the broker's default")
	f.duration(gStream, &d.TransactionInterval, "transaction-interval", "exactly-once: how often Kafka commits start while events keep coming; a Kafka transaction gathers whole Postgres transactions meanwhile. A Postgres transaction that begins after a quiet spell (no commit ended within this) commits as soon as it ends (at 10 single-row tx/s p50 3.8-7.5 ms instead of 5-24, where the tick fell). Each commit pauses publishing for the round trips of the last acks, the checkpoint record and EndTxn, so lower means less latency and more pauses (produce requests leave no more often than this: --batch-timeout is raised to it). Measured at 1,000 single-row tx/s (one round, docs/exactly-once.md): 10ms p50/p99 12/62 ms and 3.9 times the broker CPU per event; 15ms 13/31 ms; 25ms 19/33 ms (at-least-once: 5/10 ms); a 100,000-event backlog drained at 89k events/s with 10ms, 120k with 15ms, 142k with 25ms (at-least-once 152k). A Postgres transaction that takes longer keeps its Kafka transaction open until its commit")
	f.duration(gStream, &d.TransactionTimeout, "transaction-timeout", "exactly-once: the broker aborts a Kafka transaction open longer, and fences the relay (it restarts from its checkpoint); raise it for Postgres transactions that take longer to stream; at most the brokers' transaction.max.timeout.ms (15m by default)")
}
