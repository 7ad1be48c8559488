// Command outbox-cdc relays a Postgres transactional outbox to Kafka by
// reading the write-ahead log through a logical replication slot.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	os.Exit(mainExit(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure: unreachable server, stream failure
	exitUsage   = 2 // a flag or environment variable to fix
)

func mainExit(args, environ []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
	case "version":
		fmt.Fprintln(stdout, "outbox-cdc", version)
		return exitOK
	case "help":
		args = []string{"--help"}
	default:
		fmt.Fprintf(stderr, "outbox-cdc: unknown command %q; commands are run (the default), version and help\n", cmd)
		return exitUsage
	}

	cfg, err := config.Parse(args, environ, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc: %v (see outbox-cdc --help)\n", err)
		return exitUsage
	}
	topic, err := sink.ParseTopic(cfg.Topic)
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc: --topic: %v\n", err)
		return exitUsage
	}
	if cfg.OnInvalid == config.OnInvalidDLQ {
		if err := sink.ValidateTopicName(cfg.DeadLetterTopic); err != nil {
			fmt.Fprintf(stderr, "outbox-cdc: --dlq-topic: %v\n", err)
			return exitUsage
		}
	}
	log := newLogger(cfg.LogFormat, cfg.LogLevel, stderr)

	if path := os.Getenv("OUTBOX_CDC_CPUPROFILE"); path != "" {
		// A debugging aid for the benchmark: a CPU profile of the whole run.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("starting", slog.String("version", version), slog.String("table", cfg.QualifiedTable()),
		slog.String("slot", cfg.Slot), slog.String("publication", cfg.Publication), slog.String("topic", cfg.Topic))
	if err := run(ctx, cfg, topic, log); err != nil {
		fmt.Fprintf(stderr, "outbox-cdc: %s\n", oneLine(err))
		if errors.Is(err, replication.ErrColumnMissing) {
			return exitUsage
		}
		return exitFailure
	}
	log.Info("stopped")
	return exitOK
}

// oneLine folds a multi-line error (pgx lists each address it tried) into
// the single line a user reads first.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

func newLogger(format, level string, w io.Writer) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // validated by config
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
