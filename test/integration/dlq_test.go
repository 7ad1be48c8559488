package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestDLQReplay: events too large for their topic's max.message.bytes are
// dead-lettered, beside one routed to a topic name Kafka rejects and a row
// that did not decode. `dlq list` shows them; `dlq replay` fails (exit 1)
// while the cause remains and publishes nothing; once the topic's limit is
// raised, a dry run publishes nothing and the replay publishes each to its
// topic, after the events of its key published meanwhile, in order, with its
// key, id, headers and timestamp. The invalid topic's dead letter goes to
// --to-topic; the row that did not decode is skipped, saying why. The
// dead-letter topic still holds all of them afterwards.
func TestDLQReplay(t *testing.T) {
	o := newOutbox(t, "dlqreplay", looseColumns)
	dlqTopic, order, fixed := o.name+".dlq", o.name+".order", o.name+".fixed"
	createTopicsWith(t, map[string]string{"max.message.bytes": "4000"}, order)
	createTopicsWith(t, nil, dlqTopic, fixed)
	startRelay(t, o.args("--dlq-topic", dlqTopic)...)

	ids := map[string]string{} // key-n → id
	for n := range 4 {
		for _, key := range []string{"o-1", "o-2"} {
			size := 10
			if n%2 == 1 {
				size = 6000 // incompressible: over 4000 bytes even with lz4
			}
			ids[fmt.Sprintf("%s-%d", key, n)] = o.insertOne(t, uuid.NewString(), "order", key, "created", payload(n, size), `{"traceparent": "00-`+key+`"}`)
		}
	}
	invalid := o.insertOne(t, uuid.NewString(), "bad topic!", "o-3", "created", payload(0, 10), nil)
	undecoded := o.insertOne(t, uuid.NewString(), "order", "o-4", "created", nil, nil)
	published := consume(t, []string{order}, 4, time.Minute)
	dead := consumeN(t, dlqTopic, 6, time.Minute)

	list := dlqList(t, dlqTopic)
	reasons := map[string]int{}
	for _, e := range list {
		reasons[e.Reason]++
		if e.Reason == "message_too_large" && e.Topic != order {
			t.Errorf("dead letter %s was meant for %q, want %s", e.ID, e.Topic, order)
		}
	}
	if fmt.Sprint(reasons) != "map[invalid_topic:1 message_too_large:4 null_column:1]" {
		t.Fatalf("dead letters by reason: %v", reasons)
	}
	base := []string{"dlq", "replay", "--kafka-brokers", broker.Brokers, "--dlq-topic", dlqTopic}
	tooLarge := append(slices.Clone(base), "--reason", "message_too_large")

	code, out, _ := runDLQ(t, tooLarge...)
	if code != 1 || !strings.Contains(out, "failed 4:") || !strings.Contains(out, "an earlier dead letter of its key failed") {
		t.Errorf("replay before the fix: exit %d, want 1 and 4 failed:\n%s", code, out)
	}
	t.Logf("dlq replay before the fix (exit %d):\n%s", code, out)
	alterTopic(t, order, "max.message.bytes", "1000000")
	code, out, _ = runDLQ(t, append(tooLarge, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "would replay 4 to "+order) {
		t.Errorf("dry run: exit %d:\n%s", code, out)
	}
	if n := len(consumeN(t, order, 4, time.Minute)); n != 4 {
		t.Fatalf("before the replay %s holds %d events, want the 4 published", order, n)
	}
	code, out, _ = runDLQ(t, tooLarge...)
	if code != 0 || !strings.Contains(out, "replayed 4 to "+order) || !strings.Contains(out, "4 replayed, 0 skipped, 0 failed") {
		t.Fatalf("replay: exit %d:\n%s", code, out)
	}
	t.Logf("dlq replay:\n%s", out)
	checkReplayedOrder(t, consumeN(t, order, 8, time.Minute), published, dead, ids)

	code, out, _ = runDLQ(t, append(slices.Clone(base), "--reason", "invalid_topic,null_column", "--to-topic", fixed)...)
	if code != 0 || !strings.Contains(out, "replayed 2 to "+fixed) {
		t.Errorf("replay to --to-topic: exit %d:\n%s", code, out)
	}
	code, out, _ = runDLQ(t, append(slices.Clone(base), "--reason", "null_column")...)
	if code != 0 || !strings.Contains(out, "skipped 1:") || !strings.Contains(out, "give --to-topic") {
		t.Errorf("replay of a row that did not decode: exit %d:\n%s", code, out)
	}
	got, _ := byID(t, consumeN(t, fixed, 2, time.Minute))
	if _, ok := got[invalid]; !ok || len(got) != 2 {
		t.Errorf("%s holds %v, want the invalid topic's event %s and the row %s", fixed, slices.Collect(maps.Keys(got)), invalid, undecoded)
	}
	if again := dlqList(t, dlqTopic); len(again) != len(list) {
		t.Errorf("after the replays `dlq list` shows %d dead letters, want %d", len(again), len(list))
	}
}

// checkReplayedOrder: per key, in partition order, n=0 and 2 (published)
// then 1 and 3 (replayed); each replayed event has the key, id, timestamp
// and headers of its dead letter but the outbox_cdc.* ones, and the same
// headers as the events published directly.
func checkReplayedOrder(t *testing.T, msgs, published, dead []kafka.Message, ids map[string]string) {
	t.Helper()
	deadByID := deadLetters(t, dead)
	wantKeys := headerNames(published[0])
	byKey := map[string][]string{}
	for _, m := range sortedByOffset(msgs) {
		id, _ := testkit.Header(m, "id")
		byKey[string(m.Key)] = append(byKey[string(m.Key)], id)
		if got := headerNames(m); got != wantKeys {
			t.Errorf("event %s: headers %s, want %s", id, got, wantKeys)
		}
		d, ok := deadByID[id]
		if !ok {
			continue
		}
		var kept []kafka.Header
		for _, h := range d.Headers {
			if !strings.HasPrefix(h.Key, "outbox_cdc.") {
				kept = append(kept, h)
			}
		}
		if !bytes.Equal(m.Key, d.Key) || !bytes.Equal(m.Value, d.Value) || !m.Time.Equal(d.Time) || fmt.Sprint(m.Headers) != fmt.Sprint(kept) {
			t.Errorf("replayed %s: key %q, time %s, headers %v; its dead letter: key %q, time %s, headers %v",
				id, m.Key, m.Time, m.Headers, d.Key, d.Time, kept)
		}
	}
	for _, key := range []string{"o-1", "o-2"} {
		var want []string
		for _, n := range []int{0, 2, 1, 3} {
			want = append(want, ids[fmt.Sprintf("%s-%d", key, n)])
		}
		if !slices.Equal(byKey[key], want) {
			t.Errorf("key %s: events %v in partition order, want n=0, 2 (published), 1, 3 (replayed): %v", key, byKey[key], want)
		}
	}
}

// dlqEntry is what `dlq list --json` says of a dead letter.
type dlqEntry struct {
	Partition int32
	Offset    int64
	Reason    string
	Topic     string
	ID        string
	Key       string
}

func dlqList(t *testing.T, topic string) []dlqEntry {
	t.Helper()
	code, out, errOut := runDLQ(t, "dlq", "list", "--kafka-brokers", broker.Brokers, "--dlq-topic", topic, "--json")
	var res struct {
		DeadLetters []dlqEntry `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
		t.Fatalf("dlq list: exit %d, %v:\n%s\n%s", code, err, out, errOut)
	}
	return res.DeadLetters
}

// runDLQ runs outbox-cdc and returns its exit code, stdout and stderr.
func runDLQ(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("run outbox-cdc %v: %v", args, err)
	}
	return 0, stdout.String(), stderr.String()
}

func payload(n, size int) string {
	pad := make([]byte, size)
	_, _ = rand.Read(pad)
	return fmt.Sprintf(`{"n": %d, "pad": "%s"}`, n, base64.StdEncoding.EncodeToString(pad))
}

func headerNames(m kafka.Message) string {
	var ks []string
	for _, h := range m.Headers {
		ks = append(ks, h.Key)
	}
	return strings.Join(ks, ",")
}

func createTopicsWith(t *testing.T, configs map[string]string, topics ...string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, name := range topics {
		tc := kafka.TopicConfig{Topic: name, NumPartitions: 3, ReplicationFactor: 1}
		for k, v := range configs {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
		}
		req.Topics = append(req.Topics, tc)
	}
	res, err := client.CreateTopics(context.Background(), req)
	if err == nil {
		err = errors.Join(slices.Collect(maps.Values(res.Errors))...)
	}
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
}

// alterTopic sets one config of topic (AlterConfigs: the others return to
// the broker's defaults).
func alterTopic(t *testing.T, topic, name, value string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	res, err := client.AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, Configs: []kafka.AlterConfigRequestConfig{{Name: name, Value: value}}}}})
	if err == nil {
		err = errors.Join(slices.Collect(maps.Values(res.Errors))...)
	}
	if err != nil {
		t.Fatalf("alter %s %s=%s: %v", topic, name, value, err)
	}
}
