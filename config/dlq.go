package config

import (
	"github.com/outbox-cdc/outbox-cdc/dlq"
)

// The dlq commands read the dead-letter topic (package dlq).
const (
	dlqListHelp = "Lists the dead letters in --dlq-topic: partition and offset, reason, the topic each was meant for, table, id, key and size; " +
		"--reason and --from/--to or --offsets choose which. The topic is only read: nothing is consumed or removed."
	dlqReplayHelp = "Publishes the chosen dead letters again (acks=all) to the topic each was meant for (its outbox_cdc.topic header), or to --to-topic, " +
		"once their cause is fixed: in offset order per partition, with their key, value, timestamp and headers, but the headers that describe the failure " +
		"(outbox_cdc.reason, .error, .table, .lsn, .topic, .partition, .column.*, .null, .null_key, .truncated, .value_bytes); a dead letter of an event with a null key (outbox_cdc.null_key) is published with a null key again. " +
		"A dead letter whose row named its partition (--column-partition, the outbox_cdc.partition header) goes to that partition; one the topic lacks fails. " +
		"Skipped, and said why: a dead letter whose value was left out to fit the dead-letter topic, and one with no recorded topic " +
		"(a row that did not decode) unless --to-topic is given. A dead letter that fails holds back the later ones of its key. " +
		"The dead letters stay in --dlq-topic, so replaying twice publishes twice (consumers deduplicating by the id header, as package inbox does, see each event once). " +
		"Each dead letter's topic (or --to-topic) is admitted as run admits an event's, by run's settings (--topic-allow of the dead letter's table, --max-topics, " +
		"and never --dlq-topic, --checkpoint-topic or a __ topic: give them as run has them, its --config file is enough): " +
		"one run would refuse is skipped with run's reason (topic_not_allowed, topic_limit, invalid_topic). " +
		"The topic is the relay's outbox_cdc.topic header; a dead letter holding two values of a header the relay writes (a row wrote one, before outbox-cdc kept rows from outbox_cdc.* headers) is skipped. " +
		"Exit 1 if any failed."
)

// dlqFlags are the flags of the dlq commands but --dlq-topic, which is
// run's too.
func dlqFlags(f *flags, c *Config) {
	f.value(gDLQ, &list[string]{dst: &c.DLQ.Reasons, parse: words, layer: &f.layer, add: true}, "reason", "only dead letters with one of these reasons, comma-separated, such as message_too_large,topic_missing (the outbox_cdc.reason header); empty: any")
	f.fs.Int64Var(&c.DLQ.Offsets.From, "from", c.DLQ.Offsets.From, "first offset chosen, in every partition")
	f.add(gDLQ, "from")
	f.fs.Int64Var(&c.DLQ.Offsets.To, "to", c.DLQ.Offsets.To, "last offset chosen (inclusive), in every partition; -1: the end")
	f.add(gDLQ, "to")
	f.value(gDLQ, offsetList{&c.DLQ.Partitions}, "offsets", "only these partitions and offsets, comma-separated: P (all of partition P), P:N, P:FROM-TO (inclusive) or P:FROM- (to the end); instead of --from and --to")
	f.str(gReplay, &c.DLQReplay.ToTopic, "to-topic", "publish every chosen dead letter to this topic instead of the one it was meant for (a name Kafka refused, a row that did not decode); empty: each its own")
	f.boolean(gReplay, &c.DLQReplay.DryRun, "dry-run", "say what would be replayed, skipped or would fail, and publish nothing")
}

func (c Config) validateDLQ() error {
	s := c.DLQ
	switch {
	case c.Relay.Topics.DeadLetterTopic == "":
		return usagef("--dlq-topic must name the dead-letter topic")
	case s.Offsets.From < 0:
		return usagef("--from %d: want an offset from 0", s.Offsets.From)
	case s.Offsets.To < -1 || s.Offsets.To >= 0 && s.Offsets.To < s.Offsets.From:
		return usagef("--to %d: want an offset from --from (%d), or -1 for the end", s.Offsets.To, s.Offsets.From)
	case len(s.Partitions) > 0 && s.Offsets != dlq.All:
		return usagef("--offsets and --from/--to: give one or the other")
	}
	if c.Command == CmdDLQReplay {
		_, err := c.Relay.Admission(nil) // as run's: its routes, --topic-allow, --max-topics
		return err
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
