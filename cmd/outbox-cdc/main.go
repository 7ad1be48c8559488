// Command outbox-cdc relays a Postgres transactional outbox to Kafka by
// reading the write-ahead log through a logical replication slot. It parses
// flags and environment (package config), serves metrics and probes, and
// runs package relay, which does the relaying; check, setup and status call
// replication and sink directly.
//
//	outbox-cdc [run] [flags]   relay (the default command)
//	outbox-cdc check [flags]   preflight checklist for Postgres and Kafka
//	outbox-cdc setup [flags]   create the publication, the slot and grants
//	outbox-cdc status [flags]  where the slot stands
//	outbox-cdc dlq list|replay [flags]  the dead letters, and publishing them again
//	outbox-cdc version         (also --version)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

func main() {
	os.Exit(mainExit(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure: unreachable server, stream failure, a failed check
	exitUsage   = 2 // a flag or environment variable to fix
)

func mainExit(args, environ []string, stdout, stderr io.Writer) int {
	cmd := config.CmdRun
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		cmd = "version"
	}
	if cmd == "dlq" && len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = cmd+" "+args[0], args[1:] // dlq list, dlq replay
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	case "help":
		if len(args) > 0 {
			cmd = args[0]
		}
		if cmd == "dlq" && len(args) > 1 {
			cmd += " " + args[1]
		}
		args = []string{"--help"}
	}

	cfg, err := config.Parse(cmd, args, environ, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	red := newRedactor()
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc %s: %s (see outbox-cdc %s --help)\n", cmd, red.redact(err.Error()), cmd)
		return exitUsage
	}
	log := newLogger(cfg.LogFormat, cfg.LogLevel, stderr, red)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case config.CmdCheck:
		return check(ctx, cfg, stdout, stderr, red)
	case config.CmdSetup:
		return setup(ctx, cfg, stdout, stderr, red)
	case config.CmdStatus:
		return status(ctx, cfg, stdout, stderr, red)
	case config.CmdDLQList:
		return dlqList(ctx, cfg, stdout, stderr, red)
	case config.CmdDLQReplay:
		return dlqReplay(ctx, cfg, stdout, stderr, red)
	}

	if path := os.Getenv("OUTBOX_CDC_CPUPROFILE"); path != "" {
		// A debugging aid for the benchmark: a CPU profile of the whole run.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	if err := run(ctx, cfg, log); err != nil {
		fmt.Fprintf(stderr, "outbox-cdc: %s\n", red.oneLine(err))
		var usage *config.UsageError
		if errors.Is(err, slot.ErrColumnMissing) || errors.As(err, &usage) {
			return exitUsage
		}
		return exitFailure
	}
	log.Info("stopped")
	return exitOK
}
