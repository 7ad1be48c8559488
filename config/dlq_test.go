package config

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestDLQFlags(t *testing.T) {
	base := []string{"--kafka-brokers", "k:1"}
	c, err := Parse(CmdDLQReplay, append(base, "--reason", "message_too_large, topic_missing", "--offsets", "0:5-9,2", "--to-topic", "fixed", "--dry-run", "--json"),
		[]string{"OUTBOX_CDC_DLQ_TOPIC=app.dlq"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintln(c.Relay.Topics.DeadLetterTopic, c.DLQ, c.DLQReplay, c.JSON); got != "app.dlq {[message_too_large topic_missing] 0- map[0:5-9 2:0-]} {fixed true} true\n" {
		t.Errorf("parsed %s", got)
	}
	c, err = Parse(CmdDLQList, append(base, "--from", "3", "--to", "7"), nil, io.Discard)
	if err != nil || fmt.Sprintln(c.DLQ, c.Relay.Topics.DeadLetterTopic) != "{[] 3-7 map[]} outbox.dlq\n" {
		t.Errorf("list --from 3 --to 7: %+v, %v", c.DLQ, err)
	}
	for _, tt := range []struct {
		cmd  string
		args []string
		want string
	}{
		{CmdDLQList, nil, "--kafka-brokers"},
		{CmdDLQList, []string{"--dry-run"}, "not defined: -dry-run"},
		{CmdDLQList, []string{"--postgres-url", "x"}, "not defined"},
		{CmdDLQReplay, []string{"--offsets", "0:9-1"}, "want a number from 9"},
		{CmdDLQReplay, []string{"--offsets", "0", "--from", "2"}, "one or the other"},
		{CmdDLQReplay, []string{"--from", "5", "--to", "4"}, "--to 4"},
		{CmdDLQReplay, []string{"--from", "-1"}, "--from -1"},
		{CmdDLQReplay, []string{"--dlq-topic", ""}, "--dlq-topic"},
		{"dlq", []string{}, "dlq list, dlq replay"},
	} {
		args := tt.args
		if tt.want != "--kafka-brokers" {
			args = append(append([]string{}, base...), args...)
		}
		if _, err := Parse(tt.cmd, args, nil, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %q: %v, want %q", tt.cmd, tt.args, err, tt.want)
		}
	}
}

// TestDLQReplayTakesRunsAdmission: dlq replay reads run's settings that
// admit a topic from its flags, variables and config file alike, and
// refuses one that cannot work as run would.
func TestDLQReplayTakesRunsAdmission(t *testing.T) {
	base := []string{"--kafka-brokers", "k:1"}
	c, err := Parse(CmdDLQReplay, append(base, "--topic-allow", `ev\..*`, "--max-topics", "3", "--topic", "ev.{aggregate_type}"),
		[]string{"OUTBOX_CDC_CHECKPOINT_TOPIC=ckpt"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Relay
	if got := fmt.Sprintln(r.Defaults.Route.Allow, r.Topics.Max, r.Defaults.Route.Topic, r.Delivery.CheckpointTopic); got != "ev\\..* 3 ev.{aggregate_type} ckpt\n" {
		t.Errorf("parsed %s", got)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic-allow", "("}, `--topic-allow "("`},
		{[]string{"--max-topics", "-1"}, "--max-topics -1"},
		{[]string{"--topic", "outbox.dlq"}, "is the dead-letter topic"},
	} {
		if _, err := Parse(CmdDLQReplay, append(append([]string{}, base...), tt.args...), nil, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("dlq replay %q: %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := Parse(CmdDLQList, append(base, "--topic-allow", "x"), nil, io.Discard); err == nil {
		t.Error("dlq list took --topic-allow, which it has no use for")
	}
}
