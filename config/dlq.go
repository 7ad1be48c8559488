package config

import (
	"flag"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/dlq"
)

// The dlq commands read the dead-letter topic (package dlq).
const (
	dlqListHelp = "Lists the dead letters in --dlq-topic: partition and offset, reason, the topic each was meant for, table, id, key and size; " +
		"--reason and --from/--to or --offsets choose which. The topic is only read: nothing is consumed or removed."
	dlqReplayHelp = "Publishes the chosen dead letters again (acks=all) to the topic each was meant for (its outbox_cdc.topic header), or to --to-topic, " +
		"once their cause is fixed: in offset order per partition, with their key, value, timestamp and headers, but the headers that describe the failure " +
		"(outbox_cdc.reason, .error, .table, .lsn, .topic, .column.*, .null, .truncated, .value_bytes). " +
		"Skipped, and said why: a dead letter whose value was left out to fit the dead-letter topic, and one with no recorded topic " +
		"(a row that did not decode) unless --to-topic is given. A dead letter that fails holds back the later ones of its key. " +
		"The dead letters stay in --dlq-topic, so replaying twice publishes twice (consumers deduplicating by the id header, as package inbox does, see each event once). " +
		"Exit 1 if any failed."
)

// dlqFlags are the flags of the dlq commands.
func dlqFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.DeadLetterTopic, "dlq-topic", "outbox.dlq", "the dead-letter topic to read (run's --dlq-topic)")
	fs.Var(reasonList{&c.DLQ.Reasons}, "reason", "only dead letters with one of these reasons, comma-separated, such as message_too_large,topic_missing (the outbox_cdc.reason header); empty: any")
	fs.Int64Var(&c.DLQ.Offsets.From, "from", 0, "first offset chosen, in every partition")
	fs.Int64Var(&c.DLQ.Offsets.To, "to", -1, "last offset chosen (inclusive), in every partition; -1: the end")
	fs.Var(offsetList{&c.DLQ.Partitions}, "offsets", "only these partitions and offsets, comma-separated: P (all of partition P), P:N, P:FROM-TO (inclusive) or P:FROM- (to the end); instead of --from and --to")
	if c.Command == CmdDLQReplay {
		fs.StringVar(&c.DLQReplay.ToTopic, "to-topic", "", "publish every chosen dead letter to this topic instead of the one it was meant for (a name Kafka refused, a row that did not decode); empty: each its own")
		fs.BoolVar(&c.DLQReplay.DryRun, "dry-run", false, "say what would be replayed, skipped or would fail, and publish nothing")
	}
}

func (c Config) validateDLQ() error {
	s := c.DLQ
	switch {
	case c.DeadLetterTopic == "":
		return usagef("--dlq-topic must name the dead-letter topic")
	case s.Offsets.From < 0:
		return usagef("--from %d: want an offset from 0", s.Offsets.From)
	case s.Offsets.To < -1 || s.Offsets.To >= 0 && s.Offsets.To < s.Offsets.From:
		return usagef("--to %d: want an offset from --from (%d), or -1 for the end", s.Offsets.To, s.Offsets.From)
	case len(s.Partitions) > 0 && s.Offsets != dlq.All:
		return usagef("--offsets and --from/--to: give one or the other")
	}
	return nil
}

// reasonList is --reason: comma-separated, repeatable.
type reasonList struct{ dst *[]string }

func (r reasonList) String() string {
	if r.dst == nil {
		return ""
	}
	return strings.Join(*r.dst, ",")
}

func (r reasonList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*r.dst = append(*r.dst, v)
		}
	}
	return nil
}

// offsetList is --offsets (dlq.ParseOffsets).
type offsetList struct{ dst *map[int32]dlq.Range }

func (o offsetList) String() string { return "" }

func (o offsetList) Set(s string) error {
	m, err := dlq.ParseOffsets(s)
	if err != nil {
		return err
	}
	*o.dst = m
	return nil
}
