package dlq

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// TestReplay has sink's writer dead-letter events of two keys, refused by a
// topic whose max.message.bytes is too small, one routed to a topic name
// Kafka rejects, and one too large to keep its value; then replays them as
// an operator would: before the cause is fixed (all fail, nothing is
// published), dry (nothing is published), after it (each lands on its key's
// partition after the events published meanwhile, in order, with its key,
// id, headers and timestamp), and to --to-topic. The dead-letter topic still
// holds every dead letter.
func TestReplay(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	for _, tp := range []struct {
		name  string
		parts int32
		cfg   map[string]string
	}{{"ev.order", 3, map[string]string{"max.message.bytes": "2000"}}, {"dlq", 2, nil}, {"fixed", 1, nil}} {
		if err := cluster.CreateTopic(tp.name, tp.parts, tp.cfg); err != nil {
			t.Fatal(err)
		}
	}
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	published := publish(ctx, t, brokers)
	cfg := Config{Brokers: brokers, Topic: "dlq"}

	all, err := List(ctx, cfg, Everything)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range all {
		reasons[e.Reason]++
	}
	if fmt.Sprint(reasons) != "map[invalid_topic:1 message_too_large:5]" || len(all) != 6 {
		t.Fatalf("dead letters by reason %v, want 4 too large for the topic, 1 over --max-message-bytes, 1 invalid topic", reasons)
	}
	tooLarge := Selection{Offsets: All, Reasons: []string{sink.ReasonMessageTooLarge}}

	// Before the cause is fixed: the first of each key fails, the others
	// are held back; the too-large one is skipped.
	rep, err := Replay(ctx, cfg, tooLarge, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if actions := countActions(rep); rep.Failed != 4 || rep.Skipped != 1 || len(rep.Replayed) != 0 || actions != "map[failed:2 held_back:2 skipped:1]" {
		t.Errorf("replay before the fix: %s, failed %d, skipped %d, replayed %v", actions, rep.Failed, rep.Skipped, rep.Replayed)
	}
	alter(ctx, t, brokers, "ev.order", "max.message.bytes", "100000")
	rep, err = Replay(ctx, cfg, tooLarge, Options{DryRun: true})
	if err != nil || rep.Replayed["ev.order"] != 4 || rep.Skipped != 1 || rep.Failed != 0 {
		t.Errorf("dry run: %+v, %v", rep, err)
	}
	if got := readTopic(ctx, t, brokers, "ev.order"); len(got) != len(published) {
		t.Fatalf("before the replay, ev.order holds %d events, want %d", len(got), len(published))
	}
	rep, err = Replay(ctx, cfg, tooLarge, Options{})
	if err != nil || rep.Replayed["ev.order"] != 4 || rep.Skipped != 1 || rep.Failed != 0 {
		t.Fatalf("replay: %+v, %v", rep, err)
	}
	checkReplayed(t, readTopic(ctx, t, brokers, "ev.order"), published)

	// The invalid topic's dead letter, to --to-topic.
	rep, err = Replay(ctx, cfg, Selection{Offsets: All, Reasons: []string{sink.ReasonInvalidTopic}}, Options{ToTopic: "fixed"})
	if err != nil || rep.Replayed["fixed"] != 1 {
		t.Fatalf("replay to --to-topic: %+v, %v", rep, err)
	}
	fixed := readTopic(ctx, t, brokers, "fixed")
	if want := messageHeaders(published[0]); len(fixed) != 1 || messageHeaders(fixed[0]) != want {
		t.Errorf("replayed to fixed: %d messages, headers %s; want the headers of an event published: %s", len(fixed), messageHeaders(fixed[0]), want)
	}
	if again, err := List(ctx, cfg, Everything); err != nil || len(again) != len(all) {
		t.Errorf("after the replays the dead-letter topic holds %d dead letters (%v), want %d", len(again), err, len(all))
	}
}

// publish has sink's writer publish to ev.{aggregate_type}: for keys a and
// b, events n=0..3 alternating small (published) and large (dead-lettered),
// one routed to an invalid topic name, one over --max-message-bytes. It
// returns what ev.order holds.
func publish(ctx context.Context, t *testing.T, brokers []string) []kafka.Message {
	t.Helper()
	route, err := sink.ParseTopic("ev.{aggregate_type}")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fates := map[uint64]string{}
	done := func(token uint64, reason string, err error) {
		mu.Lock()
		defer mu.Unlock()
		fates[token] = fmt.Sprint(reason, err)
	}
	w := sink.NewWriter(sink.Config{Brokers: brokers, Topic: route, BatchSize: 100, BatchTimeout: 5 * time.Millisecond, MaxMessageBytes: 20000,
		MissingTopicTimeout: 10 * time.Second, DeadLetterTopic: "dlq", Envelope: sink.EnvelopeCloudEvents, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, done)
	token := uint64(0)
	send := func(aggType, key string, n, size int) {
		pad := make([]byte, size) // incompressible: lz4 must not make it fit
		_, _ = rand.Read(pad)
		payload := fmt.Sprintf(`{"n": %d, "pad": "%s"}`, n, base64.StdEncoding.EncodeToString(pad))
		ev := &decode.Event{ID: fmt.Sprintf("%s-%d", key, n), AggregateType: aggType, AggregateID: key, EventType: "created", Payload: []byte(payload),
			Table: "public.outbox", Time: time.UnixMilli(1700000000000 + int64(token)), ContentType: "application/json",
			Headers: []decode.Header{{Key: "traceparent", Value: []byte("00-" + key)}}}
		if err := w.Publish(ctx, ev, token); err != nil {
			t.Fatalf("publish %s: %v", ev.ID, err)
		}
		token++
	}
	for n := range 4 {
		for _, key := range []string{"a", "b"} {
			send("order", key, n, []int{10, 4000}[n%2])
		}
	}
	send("bad topic!", "a", 9, 10)
	send("order", "c", 0, 20000)
	for {
		mu.Lock()
		n := len(fates)
		mu.Unlock()
		if n == int(token) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d fates", n, token)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return readTopic(ctx, t, brokers, "ev.order")
}

// checkReplayed: each key's events, in partition order, are n=0..3, those
// published first, then those replayed, with the key, id, headers and time
// an event published carries.
func checkReplayed(t *testing.T, got, published []kafka.Message) {
	t.Helper()
	byKey := map[string][]string{}
	for _, m := range got {
		id, _ := testkit.Header(m, "id")
		byKey[string(m.Key)] = append(byKey[string(m.Key)], id)
		if want := messageHeaders(published[0]); messageHeaders(m) != want {
			t.Errorf("%s: headers %s, want %s", id, messageHeaders(m), want)
		}
		if ce, _ := testkit.Header(m, "ce_id"); ce != id || !strings.Contains(string(m.Value), `"n": `+id[2:]) {
			t.Errorf("%s: ce_id %s, value %.20s", id, ce, m.Value)
		}
	}
	for _, k := range []string{"a", "b"} {
		if want := []string{k + "-0", k + "-2", k + "-1", k + "-3"}; !slices.Equal(byKey[k], want) {
			t.Errorf("key %s: events %v in partition order, want %v", k, byKey[k], want)
		}
	}
}

func countActions(rep *Report) string {
	n := map[string]int{}
	for _, o := range rep.Outcomes {
		n[o.Action]++
	}
	return fmt.Sprint(n)
}

// messageHeaders is the keys of m's headers, comma-separated.
func messageHeaders(m kafka.Message) string {
	var ks []string
	for _, h := range m.Headers {
		ks = append(ks, h.Key)
	}
	return strings.Join(ks, ",")
}

// readTopic reads every message of topic, with a client independent of
// the code under test (internal/testkit's).
func readTopic(ctx context.Context, t *testing.T, brokers []string, topic string) []kafka.Message {
	t.Helper()
	transport := &kafka.Transport{} // not the default one, whose metadata may predate partitions a test added
	defer transport.CloseIdleConnections()
	ends, _, err := testkit.EndOffsets(ctx, &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	return testkit.ReadAll(ctx, t, strings.Join(brokers, ","), ends)
}

func alter(ctx context.Context, t *testing.T, brokers []string, topic, name, value string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, Configs: []kafka.AlterConfigRequestConfig{{Name: name, Value: value}}}}})
	if err == nil {
		for _, e := range res.Errors {
			err = e
		}
	}
	if err != nil {
		t.Fatalf("alter %s %s=%s: %v", topic, name, value, err)
	}
}

// TestReplayKeepsNullKey: an event with a null key (--null-key=allow, or
// a table without a key column) is dead-lettered keyed by its id, and a
// replay publishes it with a null key again, as run would have: not with
// a key its consumers never saw, on a partition that key picks.
func TestReplayKeepsNullKey(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"), kfake.SeedTopics(3, "ev.order"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	route, _ := sink.ParseTopic("ev.{aggregate_type}")
	if route, err = route.Allow(`ev\.order`); err != nil {
		t.Fatal(err)
	}
	fates := make(chan string, 2)
	w := sink.NewWriter(sink.Config{Brokers: brokers, Topic: route, DeadLetterTopic: "dlq", MissingTopicTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, func(_ uint64, reason string, err error) { fates <- fmt.Sprint(reason, err) })
	for i, key := range []string{"", "k"} { // refused: the allow-list has no ev.payment
		ev := &decode.Event{ID: fmt.Sprintf("e-%d", i), AggregateType: "payment", AggregateID: key, EventType: "paid", Payload: []byte(`{}`), Table: "public.outbox"}
		if err := w.Publish(ctx, ev, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if f := <-fates; f != sink.ReasonTopicNotAllowed+"<nil>" {
			t.Fatalf("fate %s, want dead-lettered as %s", f, sink.ReasonTopicNotAllowed)
		}
	}
	cfg := Config{Brokers: brokers, Topic: "dlq"}
	rep, err := Replay(ctx, cfg, Everything, Options{ToTopic: "ev.order"})
	if err != nil || rep.Replayed["ev.order"] != 2 {
		t.Fatalf("replay: %+v, %v", rep, err)
	}
	keys := map[string]string{}
	for _, m := range readTopic(ctx, t, brokers, "ev.order") {
		id, _ := testkit.Header(m, "id")
		keys[id] = fmt.Sprintf("%q", m.Key)
		if m.Key == nil {
			keys[id] = "null"
		}
	}
	if fmt.Sprint(keys) != `map[e-0:null e-1:"k"]` {
		t.Errorf("replayed keys by id %v, want e-0 with a null key and e-1 with k", keys)
	}
}
