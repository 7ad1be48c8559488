package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/dlq"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// Commands, each with its own flags (see Parse).
const (
	CmdRun    = "run"    // relay the outbox to Kafka (the default)
	CmdCheck  = "check"  // preflight: is everything run needs in place?
	CmdSetup  = "setup"  // create the publication, the slot and the grants
	CmdStatus = "status" // where the slot stands

	CmdDLQList   = "dlq list"   // the dead letters in the dead-letter topic
	CmdDLQReplay = "dlq replay" // publish dead letters again
)

// Config is what one command line says: the command, the relay's
// configuration (relay.Config, which the library receives alone), and
// what only cmd/outbox-cdc uses. Parse fills and validates it once.
type Config struct {
	Command string
	Relay   relay.Config
	// HTTPAddr serves /metrics, /healthz and /readyz (run); empty: none.
	HTTPAddr  string
	LogFormat string // text or json
	LogLevel  string // debug, info, warn or error
	// MaxProcs is GOMAXPROCS for run: 1 by default; 0 leaves Go's. The
	// GOMAXPROCS variable, when set, wins (cmd/outbox-cdc applies it).
	MaxProcs int
	Role     string // setup: the role outbox-cdc runs as, granted what it needs
	Print    bool   // setup: print the SQL instead of running it
	JSON     bool   // status, dlq: machine-readable output
	Offline  bool   // check: validate the configuration, contact no server

	DLQ       dlq.Selection // dlq list and replay: which dead letters
	DLQReplay dlq.Options   // dlq replay: --to-topic, --dry-run
	// Deprecations are warnings about deprecated settings in use, and
	// Warnings about the rest (an OUTBOX_CDC_ variable no flag reads), for
	// the caller to log.
	Deprecations, Warnings []string
}

// UsageError is a configuration mistake the user fixes by changing a
// flag, an environment variable or the config file, said in those terms.
// cmd/outbox-cdc exits 2 on it. A relay.ConfigError (relay's validation,
// relay.New) becomes one through Explain, which Parse applies.
type UsageError struct {
	Field string // the flag to fix, such as max-in-flight; empty: several, or none
	Msg   string
	err   error // what it explains: an error holding a relay.ConfigError; nil: none
}

func (e *UsageError) Error() string { return e.Msg }

// Unwrap is the error Explain said in terms of flags, if any.
func (e *UsageError) Unwrap() error { return e.err }

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

// Commands lists the commands Parse knows, in help order.
func Commands() []string {
	return []string{CmdRun, CmdCheck, CmdSetup, CmdStatus, CmdDLQList, CmdDLQReplay}
}

// TableNames returns the outbox tables as "schema.table", comma-separated.
func (c Config) TableNames() string { return c.Relay.TableNames() }

// PostgresTarget describes the Postgres URL without its password, for logs:
// "user@host:port/database".
func (c Config) PostgresTarget() string { return c.Relay.PostgresTarget() }

// defaults is what a command is before any flag, variable or file.
func defaults(cmd string) Config {
	return Config{Command: cmd, Relay: relay.Default(), HTTPAddr: "127.0.0.1:9090", LogFormat: "text", LogLevel: "info", MaxProcs: 1,
		DLQ: dlq.Everything}
}

// Parse reads cmd's args (without the program and command names), the
// environment (as returned by os.Environ) and the --config file into a
// validated Config. Each setting is taken from the first of: the command
// line, its OUTBOX_CDC_ variable (or that variable's _FILE form), the
// config file, the default. Help text goes to out; flag.ErrHelp is
// returned when it was asked for.
func Parse(cmd string, args, environ []string, out io.Writer) (Config, error) {
	groups, ok := commandGroups[cmd]
	if !ok {
		return Config{}, unknownCommand(cmd)
	}
	// A first reading of the command line, for --help, its mistakes and
	// --config, which must be read before the variables and the flags.
	first := defaults(cmd)
	ff := newFlags(&first)
	fs := ff.command(groups)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help := defaults(cmd)
			printUsage(out, cmd, newFlags(&help), groups)
			return Config{}, err
		}
		return Config{}, &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return Config{}, usagef("unexpected argument %q; flags start with --", fs.Arg(0))
	}
	c := defaults(cmd)
	p := &parser{c: &c, fl: newFlags(&c), env: environMap(environ), set: map[string]bool{}, path: ff.raw.config}
	if err := p.layers(groups, args); err != nil {
		return Config{}, err
	}
	if err := p.finish(); err != nil {
		return Config{}, err
	}
	if err := c.validate(); err != nil {
		return Config{}, Explain(err)
	}
	return c, nil
}

// unknownCommand refuses cmd, suggesting the nearest command.
func unknownCommand(cmd string) error {
	msg := fmt.Sprintf("unknown command %q; commands are %s", cmd, strings.Join(Commands(), ", "))
	if s := nearest(cmd, append(Commands(), "version", "help")); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return usagef("%s", msg)
}
