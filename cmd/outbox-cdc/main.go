// Command outbox-cdc relays a Postgres transactional outbox to Kafka by
// reading the write-ahead log through a logical replication slot. It reads
// its configuration (package config), serves metrics and probes and runs
// package relay; check, setup and status print what package admin answers.
//
//	outbox-cdc [run] [flags]   relay (the default command)
//	outbox-cdc check [flags]   preflight checklist for Postgres and Kafka (--offline: the configuration alone)
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
	"strings"
	"syscall"

	"github.com/outbox-cdc/outbox-cdc/config"
)

func main() {
	os.Exit(mainExit(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure: unreachable server, stream failure, a failed check
	exitUsage   = 2 // a flag, an environment variable or the config file to fix
)

// commands other than run, which main runs itself.
var commands = map[string]func(context.Context, config.Config, io.Writer, io.Writer, redactor) int{
	config.CmdCheck: check, config.CmdSetup: setup, config.CmdStatus: status,
	config.CmdDLQList: dlqList, config.CmdDLQReplay: dlqReplay,
}

func mainExit(args, environ []string, stdout, stderr io.Writer) int {
	cmd, args := command(args)
	if cmd == "version" {
		fmt.Fprintln(stdout, versionLine())
		return exitOK
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
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c, ok := commands[cmd]; ok {
		return c(ctx, cfg, stdout, stderr, red)
	}
	return runExit(ctx, cfg, log, stderr, red, environ)
}

// command splits the command (run when none is given; dlq's in two words)
// from its flags; help COMMAND is COMMAND --help.
func command(args []string) (string, []string) {
	word := func(i int) bool { return len(args) > i && args[i] != "" && !strings.HasPrefix(args[i], "-") }
	switch {
	case len(args) > 0 && (args[0] == "--version" || args[0] == "-version"):
		return "version", nil
	case word(0) && args[0] == "help" && word(1):
		return command(append(args[1:], "--help"))
	case word(0) && args[0] == "help":
		return config.CmdRun, []string{"--help"}
	case word(0) && args[0] == "dlq" && word(1):
		return "dlq " + args[1], args[2:]
	case word(0):
		return args[0], args[1:]
	}
	return config.CmdRun, args
}
