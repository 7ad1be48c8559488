package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestDLQCommands renders `dlq list` and `dlq replay` against a broker
// (kfake) holding three dead letters: one replayable, one whose value was
// left out, one whose topic does not exist.
func TestDLQCommands(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "outbox.dlq", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	dead := func(id, topic string, extra ...kafka.Header) kafka.Message {
		return kafka.Message{Key: []byte("k " + id), Value: []byte(`{}`), Headers: append([]kafka.Header{
			{Key: "outbox_cdc.reason", Value: []byte("message_too_large")}, {Key: "outbox_cdc.topic", Value: []byte(topic)},
			{Key: "outbox_cdc.table", Value: []byte("public.outbox")}, {Key: "id", Value: []byte(id)}}, extra...)}
	}
	w := &kafka.Writer{Addr: kafka.TCP(cluster.ListenAddrs()...), Topic: "outbox.dlq", BatchTimeout: time.Millisecond}
	if err := w.WriteMessages(context.Background(), dead("e1", "orders"),
		dead("e2", "orders", kafka.Header{Key: "outbox_cdc.truncated", Value: []byte("value")}, kafka.Header{Key: "outbox_cdc.value_bytes", Value: []byte("3000000")}),
		dead("e3", "gone")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	run := func(args ...string) (int, string) {
		var out, errOut strings.Builder
		code := mainExit(append(args, "--kafka-brokers", brokers), nil, &out, &errOut)
		return code, out.String() + errOut.String()
	}

	code, out := run("dlq", "list")
	for _, want := range []string{"3 dead letters chosen (message_too_large 3)", "0/0  ", "orders", `"k e1"`, "2.9 MiB, value left out", "gone"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("dlq list: exit %d, no %q in\n%s", code, want, out)
		}
	}
	code, out = run("dlq", "list", "--json", "--offsets", "0:1-")
	var listed struct {
		DeadLetters []struct{ ID string } `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.DeadLetters) != 2 || listed.DeadLetters[0].ID != "e2" {
		t.Errorf("dlq list --json --offsets 0:1-: exit %d, %v:\n%s", code, err, out)
	}
	code, out = run("dlq", "replay", "--dry-run")
	for _, want := range []string{"dry run: nothing is published", "would replay 1 to orders", "skipped 1:\n  0/1 (message_too_large, id e2): its value (3000000 bytes) was left out",
		"failed 1:\n  0/2 (message_too_large, id e3) to gone: topic gone does not exist", "1 would replay, 1 skipped, 1 failed"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("dlq replay --dry-run: exit %d, want 1 and %q in\n%s", code, want, out)
		}
	}
	code, out = run("dlq", "replay", "--offsets", "0:0")
	if code != 0 || !strings.Contains(out, "replayed 1 to orders\n1 replayed, 0 skipped, 0 failed") {
		t.Errorf("dlq replay --offsets 0:0: exit %d:\n%s", code, out)
	}
}

// TestDLQReplayTakesRunsAdmission: dlq replay admits as the run that wrote
// the dead letters did, given the run's settings by its config file, its
// variables or flags: a dead letter whose topic the allow-list refuses,
// one past --max-topics, one meant for the checkpoint or the dead-letter
// topic, and --to-topic refused alike are skipped with run's reason.
func TestDLQReplayTakesRunsAdmission(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "outbox.dlq", "orders", "ev.payments", "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	var msgs []kafka.Message
	for _, to := range []string{"orders", "ev.payments", "ckpt", "outbox.dlq"} {
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: []byte(`{}`), Headers: []kafka.Header{
			{Key: "outbox_cdc.reason", Value: []byte("topic_missing")}, {Key: "outbox_cdc.topic", Value: []byte(to)},
			{Key: "outbox_cdc.table", Value: []byte("public.outbox")}, {Key: "id", Value: []byte("to-" + to)}}})
	}
	w := &kafka.Writer{Addr: kafka.TCP(cluster.ListenAddrs()...), Topic: "outbox.dlq", BatchTimeout: time.Millisecond}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	path := filepath.Join(t.TempDir(), "run.yaml")
	file := "postgres_url: postgres://x\ntable: public.outbox\ntopic_allow: 'orders|ckpt|outbox\\.dlq'\ncheckpoint_topic: ckpt\ndelivery: exactly-once\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		ordersOnly = "would replay 1 to orders\nskipped 3:\n" +
			"  0/1 (topic_missing, id to-ev.payments) to ev.payments: topic_not_allowed: topic ev.payments does not match the allow-list"
		reserved = "  0/2 (topic_missing, id to-ckpt) to ckpt: topic_not_allowed: topic ckpt is the checkpoint topic (--checkpoint-topic)"
		dlq      = "  0/3 (topic_missing, id to-outbox.dlq) to outbox.dlq: topic_not_allowed: topic outbox.dlq is the dead-letter topic"
	)
	for _, tt := range []struct {
		name    string
		args    []string
		environ []string
		want    []string
	}{
		{"the run's config file", []string{"--config", path}, nil, []string{ordersOnly, reserved, dlq, "1 would replay, 3 skipped, 0 failed"}},
		{"variables", nil, []string{"OUTBOX_CDC_TOPIC_ALLOW=orders|ckpt", "OUTBOX_CDC_CHECKPOINT_TOPIC=ckpt"}, []string{ordersOnly, reserved, dlq}},
		{"flags", []string{"--topic-allow", "orders|ckpt", "--checkpoint-topic", "ckpt"}, nil, []string{ordersOnly, reserved, dlq}},
		{"the cap", []string{"--topic-allow", ".*", "--max-topics", "1"}, nil, []string{"would replay 1 to orders\n",
			"to ev.payments: topic_limit: topic ev.payments would be one more than the 1 topics in use (--max-topics)",
			"to ckpt: topic_limit"}}, // not the checkpoint topic of this run: only counted
		{"--to-topic", []string{"--to-topic", "ev.payments", "--topic-allow", "orders"}, nil, []string{"0 would replay, 4 skipped, 0 failed"}},
	} {
		var out, errOut strings.Builder
		code := mainExit(append([]string{"dlq", "replay", "--dry-run", "--kafka-brokers", brokers}, tt.args...), tt.environ, &out, &errOut)
		for _, want := range tt.want {
			if code != 0 || !strings.Contains(out.String(), want) {
				t.Errorf("%s: exit %d, want 0 and %q in\n%s%s", tt.name, code, want, out.String(), errOut.String())
			}
		}
	}
}
