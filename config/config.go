package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/dlq"
)

// Columns names the outbox table's columns; see decode.Columns.
type Columns = decode.Columns

// Commands, each with its own flags (see Parse).
const (
	CmdRun    = "run"    // relay the outbox to Kafka (the default)
	CmdCheck  = "check"  // preflight: is everything run needs in place?
	CmdSetup  = "setup"  // create the publication, the slot and the grants
	CmdStatus = "status" // where the slot stands

	CmdDLQList   = "dlq list"   // the dead letters in the dead-letter topic
	CmdDLQReplay = "dlq replay" // publish dead letters again
)

// Config is everything a command needs, parsed and validated once.
type Config struct {
	Command      string
	PostgresURL  string
	KafkaBrokers []string
	Kafka        KafkaSecurity
	Tables       []TableConfig // the outbox tables, each with its mapping and topic
	Publication  string
	Slot         string
	SlotFailover string // auto, true or false: create the slot failover-enabled (PostgreSQL 17+)
	Topic        string // topic template, see sink.ParseTopic; the default of each table, and the topic of messages
	// MessagePrefix is the prefix of the transactional logical decoding
	// messages (pg_logical_emit_message) relayed as events, as outbox.Writer's
	// Emit and sql/outbox_emit.sql write them; empty: none are.
	MessagePrefix string
	Columns       Columns // the column flags: the default mapping of each table
	// TopicRegex and TopicReplacement rewrite routed topic names (see
	// sink.Topic.Rewrite); the default of each table.
	TopicRegex, TopicReplacement string
	LogFormat                    string
	LogLevel                     string
	HTTPAddr                     string // metrics and probes; empty: none

	MaxInFlight      int           // events published but not yet acknowledged
	MaxInFlightBytes int64         // payload bytes of those events
	BatchSize        int           // most messages in one produce request
	BatchTimeout     time.Duration // least time between two requests to one broker under load
	Compression      string        // none, gzip, snappy, lz4 or zstd
	ConfirmInterval  time.Duration // how soon a newly acknowledged position is reported
	StatusInterval   time.Duration // longest gap between standby status updates
	ReceiveTimeout   time.Duration // server silence after which the connection is presumed dead
	DrainTimeout     time.Duration // how long shutdown waits for in-flight acks

	OnInvalid        string   // "dlq" or "fail": what to do with a row that cannot be published
	DeadLetterTopic  string   // where dlq sends such rows
	MaxMessageBytes  int      // largest record published; larger rows are invalid
	CreateTopics     bool     // create missing topics through the admin API, as Topic* say
	TopicPartitions  int      // of a created topic; 0: the broker's default
	TopicReplication int      // replication factor of a created topic; 0: the broker's default
	TopicConfigs     []string // KEY=VALUE configs of a created topic
	TopicAllow       string   // routed topic names must match it whole (sink.Topic.Allow); each table's default; empty: any
	MaxTopics        int      // most topics routed from rows (see sink.TopicLimit); 0: no cap
	AutoCreateTopics bool     // deprecated: without CreateTopics, ask the broker to create missing topics
	// Deprecations are warnings about deprecated settings in use, for the
	// caller to log.
	Deprecations        []string
	MissingTopicTimeout time.Duration // how long an event waits for a missing topic
	MetadataMaxAge      time.Duration // how long a topic's partitions are trusted
	HeartbeatInterval   time.Duration // 0: no heartbeats

	Envelope          string   // raw or cloudevents
	CloudEventsSource string   // ce_source; empty: /outbox-cdc/ and the table
	MetadataHeaders   bool     // commit LSN, xid and commit time headers
	Cleanup           string   // none, delete-after-publish or mark
	Mark              []string // with --cleanup=mark: COLUMN=VALUE set on published rows; each table's default
	MarkDead          []string // COLUMN=VALUE set on dead-lettered rows; each table's default
	BackfillWhere     string   // rows published before streaming when the slot is created; each table's default
	BackfillOrder     string   // the order a backfill reads rows in; each table's default
	BackfillForce     bool     // run the backfill again on an existing slot

	Role  string // setup: the role outbox-cdc runs as, granted what it needs
	Print bool   // setup: print the SQL instead of running it
	JSON  bool   // status: machine-readable output

	DLQ       dlq.Selection // dlq list and replay: which dead letters
	DLQReplay dlq.Options   // dlq replay: --to-topic, --dry-run
}

// KafkaSecurity is how the relay connects to the brokers: TLS, SASL, both or
// neither.
type KafkaSecurity struct {
	TLS                bool
	CAFile             string // PEM; empty: the system's roots
	CertFile, KeyFile  string // PEM client certificate and key (mutual TLS)
	ServerName         string // expected in the broker certificate; empty: the broker's host
	InsecureSkipVerify bool
	SASLMechanism      string // "", plain, scram-sha-256 or scram-sha-512
	SASLUsername       string
	SASLPassword       string
	// SASLAllowPlaintext permits SASL PLAIN without TLS, which sends the
	// password in clear; without it such a configuration is refused.
	SASLAllowPlaintext bool
}

// Cleanup policies (--cleanup).
const (
	CleanupNone               = "none"
	CleanupDeleteAfterPublish = "delete-after-publish"
	CleanupMark               = "mark"
)

// Policies for a row that cannot be published (--on-invalid).
const (
	OnInvalidDLQ  = "dlq"
	OnInvalidFail = "fail"
)

// marks reports whether some table has something to mark.
func (c Config) marks() bool {
	for _, t := range c.Tables {
		if len(t.Mark) > 0 || len(t.MarkDead) > 0 {
			return true
		}
	}
	return false
}

// backfills reports whether some table has a --backfill-where.
func (c Config) backfills() bool {
	for _, t := range c.Tables {
		if t.BackfillWhere != "" {
			return true
		}
	}
	return false
}

// TableNames returns the outbox tables as "schema.table", comma-separated.
func (c Config) TableNames() string {
	names := make([]string, len(c.Tables))
	for i, t := range c.Tables {
		names[i] = t.Qualified()
	}
	return strings.Join(names, ",")
}

// PostgresTarget describes the Postgres URL without its password, for logs:
// "user@host:port/database".
func (c Config) PostgresTarget() string {
	pc, err := pgconn.ParseConfig(c.PostgresURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", pc.User, pc.Host, pc.Port, pc.Database)
}

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

// fileSuffix marks an environment variable naming a file that holds the
// value (a mounted Kubernetes or Docker secret): OUTBOX_CDC_POSTGRES_URL_FILE.
const fileSuffix = "_FILE"

// EnvName returns the environment variable that stands for flag name.
func EnvName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Default returns what `outbox-cdc run` is with no flag and no environment
// but the two it requires: every default, and the table public.outbox. Set
// PostgresURL and KafkaBrokers, change what else you need (Table builds
// another table with the column and topic defaults), and hand it to
// relay.New, which validates it.
func Default() Config {
	c := Config{Command: CmdRun}
	_, raw := newFlagSet(&c, commandGroups[CmdRun])
	if err := c.tables(raw.table, true, ""); err != nil {
		panic(err) // the defaults are valid
	}
	return c
}

// Table returns a table named "schema.name" (or "name", in public) mapped
// by c's column defaults and routed by c's topic.
func (c Config) Table(name string) TableConfig {
	tc := TableConfig{Table: decode.Table{Columns: c.Columns}, Topic: c.Topic, TopicRegex: c.TopicRegex, TopicReplacement: c.TopicReplacement, TopicAllow: c.TopicAllow,
		Mark: c.Mark, MarkDead: c.MarkDead, BackfillWhere: c.BackfillWhere, BackfillOrder: c.BackfillOrder,
		Partitions: c.TopicPartitions, ReplicationFactor: c.TopicReplication, TopicConfigs: c.TopicConfigs}
	tc.Schema, tc.Name = splitTable(name)
	return tc
}

// Validate reports the first setting of c's command that cannot work, as a
// *UsageError naming the flag to fix. Parse has done it already.
func (c Config) Validate() error {
	g, ok := commandGroups[c.Command]
	if !ok {
		return usagef("unknown command %q; commands are %s", c.Command, strings.Join(Commands(), ", "))
	}
	return c.validate(g)
}

// Commands lists the commands Parse knows, in help order.
func Commands() []string {
	return []string{CmdRun, CmdCheck, CmdSetup, CmdStatus, CmdDLQList, CmdDLQReplay}
}

// Parse reads cmd's args (without the program and command names) and the
// environment (as returned by os.Environ) into a validated Config. A flag
// given on the command line wins over its environment variable, which wins
// over the variable's _FILE form. Help text goes to out; flag.ErrHelp is
// returned when it was asked for.
func Parse(cmd string, args, environ []string, out io.Writer) (Config, error) {
	groups, ok := commandGroups[cmd]
	if !ok {
		return Config{}, usagef("unknown command %q; commands are %s", cmd, strings.Join(Commands(), ", "))
	}
	c := Config{Command: cmd}
	fs, raw := newFlagSet(&c, groups)

	env := environMap(environ)
	var envErr error
	set := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if envErr == nil {
			var ok bool
			ok, envErr = setFromEnv(f, env)
			set[f.Name] = ok
		}
	})
	if envErr != nil {
		return Config{}, envErr
	}
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(interface{ environmentRead() }); ok {
			v.environmentRead()
		}
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(out, cmd, fs)
			return Config{}, err
		}
		return Config{}, &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return Config{}, usagef("unexpected argument %q; flags start with --", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	for _, b := range strings.Split(raw.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.KafkaBrokers = append(c.KafkaBrokers, b)
		}
	}
	if groups&gSlot != 0 {
		if err := c.tables(raw.table, set["table"], raw.config); err != nil {
			return Config{}, err
		}
	}
	if set["kafka-auto-create-topics"] {
		c.Deprecations = append(c.Deprecations, "--kafka-auto-create-topics is deprecated: outbox-cdc creates missing topics itself "+
			"(--create-topics, with --topic-partitions, --topic-replication-factor and --topic-config); it only applies with --create-topics=false")
	}
	k := &c.Kafka
	k.TLS = k.TLS || k.CAFile != "" || k.CertFile != "" || k.KeyFile != "" || k.ServerName != "" || k.InsecureSkipVerify
	if err := c.validate(groups); err != nil {
		return Config{}, err
	}
	return c, nil
}

// setFromEnv sets f from its environment variable, or from the file its
// _FILE variable names, and reports whether either was set.
func setFromEnv(f *flag.Flag, env map[string]string) (bool, error) {
	name := EnvName(f.Name)
	v, ok := env[name]
	path, fromFile := env[name+fileSuffix]
	switch {
	case ok && fromFile:
		return false, usagef("both %s and %s%s are set; keep one", name, name, fileSuffix)
	case fromFile:
		b, err := os.ReadFile(path)
		if err != nil {
			return false, usagef("%s%s: %v", name, fileSuffix, err)
		}
		v = strings.TrimRight(string(b), "\r\n")
		if err := f.Value.Set(v); err != nil {
			return false, usagef("%s%s (%s): %v", name, fileSuffix, path, err)
		}
	case ok:
		if err := f.Value.Set(v); err != nil {
			return false, usagef("%s=%q: %v", name, v, err)
		}
	}
	return ok || fromFile, nil
}

func printUsage(out io.Writer, cmd string, fs *flag.FlagSet) {
	fmt.Fprintf(out, "Usage: outbox-cdc %s [flags]\n\n%s\n\n", cmd, commandHelp[cmd])
	fmt.Fprintf(out, "Commands: %s, version, help. Every flag can also be set by the environment\n"+
		"variable shown, or by that variable with %s naming a file that holds the value.\n\nFlags:\n",
		strings.Join(Commands(), ", "), fileSuffix)
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(out, "  --%s (env %s, default %q)\n      %s\n", f.Name, EnvName(f.Name), f.DefValue, f.Usage)
	})
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
