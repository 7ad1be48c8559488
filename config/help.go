package config

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

var commandHelp = map[string]string{
	CmdRun:    "Streams a Postgres outbox table to Kafka through logical replication.",
	CmdCheck:  "Checks Postgres and Kafka for everything run needs, and prints the fix for each item that fails. Exit 1 if any fails. Takes run's flags; --offline only validates them.",
	CmdSetup:  "Creates the publication and the replication slot (with --backfill-where, not the slot: run creates it, exporting the snapshot the backfill reads), and grants --role what run needs (--print: only print the SQL); with --kafka-brokers, also the dead-letter topic and fixed event topics (--topic-partitions, --topic-replication-factor, --topic-config). Takes run's flags.",
	CmdStatus: "Prints where the replication slot stands: its position, the WAL it retains, wal_status, and whether a consumer streams it. Takes run's flags.",

	CmdDLQList:   dlqListHelp,
	CmdDLQReplay: dlqReplayHelp,
}

// helpGroups are --help's headings, in order: a command's own flags come
// first, then run's.
var helpGroups = []struct {
	g     group
	title string
}{
	{gSetup, "Setup"}, {gOutput, "Output"}, {gCheck, "Check"}, {gDLQ, "Dead letters"}, {gReplay, "Replay"},
	{gAdmit, "Admission: run's settings, by which a replay admits each dead letter's topic as run did (the run's --config file gives them all)"},
	{gFile, "Configuration file"}, {gPostgres, "Postgres"}, {gSlot, "Slot and tables"},
	{gColumns, "Columns (each table's default; a table of --config may have its own)"},
	{gKafka, "Kafka"}, {gRoute, "Routing and topics (--topic to --topic-config: each table's default)"},
	{gStream, "Stream and producer tuning"}, {gCleanup, "Cleanup and backfill"}, {gLog, "Logging and HTTP"},
}

// width is where --help wraps its text.
const width = 80

func printUsage(out io.Writer, cmd string, f *flags, groups group) {
	fmt.Fprintf(out, "Usage: outbox-cdc %s [flags]\n\n%s\n\n", cmd, wrap(commandHelp[cmd], "", width))
	fmt.Fprintf(out, "%s\n", wrap(fmt.Sprintf("Commands: %s, version, help. Every flag can also be set by the environment "+
		"variable shown, or by that variable with %s naming a file that holds the value, or in the --config file "+
		"under its name with _ for -. A flag wins over its variable, which wins over the file, which wins over the default.",
		strings.Join(Commands(), ", "), fileSuffix), "", width))
	shown := group(0)
	for _, h := range helpGroups {
		if groups&h.g == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", wrap(h.title, "", width))
		for _, name := range f.order {
			if g := f.groups[name]; g&h.g != 0 && g&groups&shown == 0 {
				printFlag(out, f.fs.Lookup(name))
			}
		}
		shown |= h.g
	}
}

// printFlag prints a flag's name, variable and default on one line when
// they fit, and its doc below.
func printFlag(out io.Writer, f *flag.Flag) {
	head := fmt.Sprintf("  --%s (env %s, default %q)", f.Name, EnvName(f.Name), f.DefValue)
	if len(head) > width {
		head = fmt.Sprintf("  --%s\n      (env %s, default %q)", f.Name, EnvName(f.Name), f.DefValue)
	}
	fmt.Fprintf(out, "%s\n%s\n", head, wrap(f.Usage, "      ", width))
}

// wrap breaks s into lines of at most w columns (a word longer is left
// whole), each beginning with indent.
func wrap(s, indent string, w int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(s) {
		if line != indent && len(line)+1+len(word) > w {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}
