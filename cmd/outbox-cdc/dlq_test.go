package main

import (
	"context"
	"encoding/json"
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
