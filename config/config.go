package config

import (
	"errors"
	"flag"
	"fmt"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"io"
	"regexp"
	"strings"
	"time"
)

// Columns names the outbox table's columns; see decode.Columns.
type Columns = decode.Columns

// Config is everything `outbox-cdc run` needs, parsed and validated once.
type Config struct {
	PostgresURL  string
	KafkaBrokers []string
	Schema       string // schema of the outbox table
	Table        string // outbox table name, unqualified
	Publication  string
	Slot         string
	Topic        string // topic template, see sink.ParseTopic
	Columns      Columns
	LogFormat    string
	LogLevel     string

	MaxInFlight      int           // events published but not yet acknowledged
	MaxInFlightBytes int64         // payload bytes of those events
	BatchSize        int           // most messages in one produce request
	BatchTimeout     time.Duration // longest a small batch waits for more messages
	StatusInterval   time.Duration // longest gap between standby status updates
	ReceiveTimeout   time.Duration // server silence after which the connection is presumed dead
	DrainTimeout     time.Duration // how long shutdown waits for in-flight acks

	OnInvalid           string        // "dlq" or "fail": what to do with a row that cannot be published
	DeadLetterTopic     string        // where dlq sends such rows
	MaxMessageBytes     int           // largest record published; larger rows are invalid
	AutoCreateTopics    bool          // ask the broker to create missing topics
	MissingTopicTimeout time.Duration // how long an event waits for a missing topic
	HeartbeatInterval   time.Duration // 0: no heartbeats
}

// Policies for a row that cannot be published (--on-invalid).
const (
	OnInvalidDLQ  = "dlq"
	OnInvalidFail = "fail"
)

// QualifiedTable returns "schema.table" as the user wrote it.
func (c Config) QualifiedTable() string { return c.Schema + "." + c.Table }

// UsageError is a configuration mistake the user fixes by changing a flag or
// an environment variable. cmd/outbox-cdc exits 2 on it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// envPrefix is prepended to a flag's upper-cased, underscored name to form
// its environment variable: --kafka-brokers is OUTBOX_CDC_KAFKA_BROKERS.
const envPrefix = "OUTBOX_CDC_"

// EnvName returns the environment variable that stands for flag name.
func EnvName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse reads args (without the program and command names) and the
// environment (as returned by os.Environ) into a validated Config. A flag
// given on the command line wins over its environment variable. Help text goes
// to out; flag.ErrHelp is returned when it was asked for.
func Parse(args, environ []string, out io.Writer) (Config, error) {
	var c Config
	var brokers, table string
	fs := flag.NewFlagSet("outbox-cdc run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; help goes to out

	fs.StringVar(&c.PostgresURL, "postgres-url", "", "Postgres connection string, libpq URL or key=value (required); the replication connection adds replication=database itself")
	fs.StringVar(&brokers, "kafka-brokers", "", "comma-separated Kafka bootstrap brokers, host:port (required)")
	fs.StringVar(&table, "table", "public.outbox", "outbox table, optionally schema-qualified")
	fs.StringVar(&c.Publication, "publication", "outbox_cdc", "publication carrying the outbox table's INSERTs; created when missing")
	fs.StringVar(&c.Slot, "slot", "outbox_cdc", "logical replication slot (plugin pgoutput); created when missing")
	fs.StringVar(&c.Topic, "topic", "outbox.event.{aggregate_type}", "Kafka topic template; {aggregate_type} and {event_type} are replaced from the row, anything else is literal")
	fs.StringVar(&c.Columns.ID, "column-id", "id", "column holding the event id (sent as header id)")
	fs.StringVar(&c.Columns.AggregateType, "column-aggregate-type", "aggregate_type", "column holding the aggregate type (header aggregate_type, topic routing)")
	fs.StringVar(&c.Columns.AggregateID, "column-aggregate-id", "aggregate_id", "column holding the aggregate id, used as the Kafka message key")
	fs.StringVar(&c.Columns.EventType, "column-event-type", "event_type", "column holding the event type (header event_type)")
	fs.StringVar(&c.Columns.Payload, "column-payload", "payload", "column whose value becomes the Kafka message value, byte for byte")
	fs.StringVar(&c.Columns.Headers, "column-headers", "headers", "optional jsonb column; each string member becomes a Kafka header (absent column: unused)")
	fs.StringVar(&c.Columns.Timestamp, "column-timestamp", "created_at", "optional timestamp column for the message time (absent column: commit time)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", 10000, "most events published but not yet acknowledged; reading the WAL pauses at this bound")
	fs.Int64Var(&c.MaxInFlightBytes, "max-in-flight-bytes", 64<<20, "most payload bytes published but not yet acknowledged")
	fs.IntVar(&c.BatchSize, "batch-size", 1000, "most messages in one produce request per partition")
	fs.DurationVar(&c.BatchTimeout, "batch-timeout", 5*time.Millisecond, "longest a message waits for its batch to fill before it is sent")
	fs.DurationVar(&c.StatusInterval, "status-interval", 10*time.Second, "longest gap between standby status updates to Postgres")
	fs.DurationVar(&c.ReceiveTimeout, "receive-timeout", 30*time.Second, "server silence after which the replication connection is presumed dead and reopened (keepalives are asked for when idle)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long to wait for in-flight events to be acknowledged")
	fs.StringVar(&c.OnInvalid, "on-invalid", OnInvalidDLQ, "a row that cannot be published (NULL or empty key, bad headers, too large, bad topic): dlq sends it to --dlq-topic and goes on; fail stops without confirming it")
	fs.StringVar(&c.DeadLetterTopic, "dlq-topic", "outbox.dlq", "dead-letter topic for --on-invalid=dlq; the reason, table, LSN and columns travel in outbox_cdc.* headers")
	fs.IntVar(&c.MaxMessageBytes, "max-message-bytes", 1_000_000, "largest record (key, value, headers) published; keep it at or below the topics' max.message.bytes")
	fs.BoolVar(&c.AutoCreateTopics, "kafka-auto-create-topics", true, "ask the broker to create a missing topic (the broker must allow it: auto.create.topics.enable)")
	fs.DurationVar(&c.MissingTopicTimeout, "missing-topic-timeout", 30*time.Second, "how long an event waits for its topic to exist before it is treated as invalid (--on-invalid)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "while nothing is in flight, write a logical decoding message this often so that an idle outbox still advances its slot; 0 disables")

	fs.Usage = func() {} // a parse error is reported in one line by the caller
	usage := func() {
		fmt.Fprintf(out, "Usage: outbox-cdc [run] [flags]\n\nStreams a Postgres outbox table to Kafka through logical replication.\nEvery flag can also be set by the environment variable shown.\n\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(out, "  --%s (env %s, default %q)\n      %s\n", f.Name, EnvName(f.Name), f.DefValue, f.Usage)
		})
	}

	// Environment first, so that flags parsed afterwards win.
	env := environMap(environ)
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := env[EnvName(f.Name)]
		if !ok || envErr != nil {
			return
		}
		if err := f.Value.Set(v); err != nil {
			envErr = usagef("%s=%q: %v", EnvName(f.Name), v, err)
		}
	})
	if envErr != nil {
		return Config{}, envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return Config{}, err
		}
		return Config{}, &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return Config{}, usagef("unexpected argument %q; flags start with --", fs.Arg(0))
	}

	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.KafkaBrokers = append(c.KafkaBrokers, b)
		}
	}
	c.Schema, c.Table = splitTable(table)
	return c, c.Validate()
}

func environMap(environ []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			m[k] = v
		}
	}
	return m
}

func splitTable(s string) (schema, table string) {
	if schema, table, ok := strings.Cut(s, "."); ok {
		return schema, table
	}
	return "public", s
}

// slotName is what Postgres accepts for a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Validate reports the first field that cannot work, naming the flag to fix.
func (c Config) Validate() error {
	switch {
	case c.PostgresURL == "":
		return usagef("--postgres-url (or %s) is required, e.g. postgres://user@127.0.0.1:5432/db", EnvName("postgres-url"))
	case len(c.KafkaBrokers) == 0:
		return usagef("--kafka-brokers (or %s) is required, e.g. 127.0.0.1:9092", EnvName("kafka-brokers"))
	case c.Schema == "" || c.Table == "" || strings.Contains(c.Table, "."):
		return usagef("--table %q: want table or schema.table", c.QualifiedTable())
	case c.Publication == "":
		return usagef("--publication must not be empty")
	case !slotName.MatchString(c.Slot):
		return usagef("--slot %q: a slot name is 1 to 63 characters of a-z, 0-9 and _", c.Slot)
	case c.Topic == "":
		return usagef("--topic must not be empty")
	case c.LogFormat != "text" && c.LogFormat != "json":
		return usagef("--log-format %q: want text or json", c.LogFormat)
	case c.LogLevel != "debug" && c.LogLevel != "info" && c.LogLevel != "warn" && c.LogLevel != "error":
		return usagef("--log-level %q: want debug, info, warn or error", c.LogLevel)
	case c.MaxInFlight < 1:
		return usagef("--max-in-flight %d: want at least 1", c.MaxInFlight)
	case c.MaxInFlightBytes < 1:
		return usagef("--max-in-flight-bytes %d: want at least 1", c.MaxInFlightBytes)
	case c.BatchSize < 1:
		return usagef("--batch-size %d: want at least 1", c.BatchSize)
	case c.BatchTimeout <= 0:
		return usagef("--batch-timeout %s: want a positive duration such as 5ms", c.BatchTimeout)
	case c.StatusInterval <= 0 || c.StatusInterval > time.Minute:
		return usagef("--status-interval %s: want between 1ms and 1m (Postgres drops a silent client after wal_sender_timeout)", c.StatusInterval)
	case c.ReceiveTimeout < 0:
		return usagef("--receive-timeout %s: want a positive duration, or 0 for 3 × --status-interval", c.ReceiveTimeout)
	case c.DrainTimeout < 0:
		return usagef("--drain-timeout %s: want zero or more", c.DrainTimeout)
	case c.OnInvalid != OnInvalidDLQ && c.OnInvalid != OnInvalidFail:
		return usagef("--on-invalid %q: want dlq or fail", c.OnInvalid)
	case c.OnInvalid == OnInvalidDLQ && c.DeadLetterTopic == "":
		return usagef("--dlq-topic must name a topic with --on-invalid=dlq")
	case c.MaxMessageBytes < 1024:
		return usagef("--max-message-bytes %d: want at least 1024", c.MaxMessageBytes)
	case c.MissingTopicTimeout < 0:
		return usagef("--missing-topic-timeout %s: want zero or more", c.MissingTopicTimeout)
	case c.HeartbeatInterval < 0:
		return usagef("--heartbeat-interval %s: want a positive duration, or 0 to disable", c.HeartbeatInterval)
	}
	required := map[string]string{
		"column-id": c.Columns.ID, "column-aggregate-type": c.Columns.AggregateType,
		"column-aggregate-id": c.Columns.AggregateID, "column-event-type": c.Columns.EventType,
		"column-payload": c.Columns.Payload,
	}
	for _, name := range []string{"column-id", "column-aggregate-type", "column-aggregate-id", "column-event-type", "column-payload"} {
		if required[name] == "" {
			return usagef("--%s must name a column", name)
		}
	}
	return nil
}
