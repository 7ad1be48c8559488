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
