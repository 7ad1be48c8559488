package config

import (
	"strings"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

// validate reports the first setting c's command uses that cannot work,
// as a *UsageError naming the flag to fix. The relay's settings are
// relay.Config's to judge; a command validates the parts it uses.
func (c Config) validate() error {
	if err := c.Relay.ValidateParts(c.parts()); err != nil {
		return err
	}
	switch {
	case c.LogFormat != "text" && c.LogFormat != "json":
		return usagef("--log-format %q: want text or json", c.LogFormat)
	case c.MaxProcs < 0:
		return usagef("--max-procs %d: want 1 or more, or 0 for Go's default", c.MaxProcs)
	case c.LogLevel != "debug" && c.LogLevel != "info" && c.LogLevel != "warn" && c.LogLevel != "error":
		return usagef("--log-level %q: want debug, info, warn or error", c.LogLevel)
	case (c.Command == CmdRun || c.Command == CmdCheck) && c.HTTPAddr != "" && !strings.Contains(c.HTTPAddr, ":"):
		return usagef("--http-addr %q: want host:port, such as 127.0.0.1:9090 or :9090", c.HTTPAddr)
	case c.Command == CmdSetup && strings.ContainsAny(c.Role, "\"\x00"):
		return usagef("--role %q: a role name without quotes", c.Role)
	case c.Command == CmdDLQList || c.Command == CmdDLQReplay:
		return c.validateDLQ()
	}
	return nil
}

// parts are the parts of relay.Config that c's command uses.
func (c Config) parts() relay.Part {
	switch c.Command {
	case CmdSetup:
		p := relay.PartSlot | relay.PartTopics | relay.PartCleanup
		if c.Relay.PostgresURL != "" || !c.Print { // --print alone prints the script for a fresh database
			p |= relay.PartPostgres
		}
		if len(c.Relay.Kafka.Brokers) > 0 { // setup creates topics only when given brokers
			p |= relay.PartKafka
		}
		return p
	case CmdStatus:
		return relay.PartPostgres | relay.PartSlot
	case CmdDLQList, CmdDLQReplay:
		return relay.PartKafka
	}
	return relay.PartAll
}
