package integration

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
)

// TestRefusedEventKeepsItsPlace: the topic's max.message.bytes is below
// --max-message-bytes, so the broker refuses one event of an aggregate that
// the relay itself accepts. With --on-invalid=fail the relay stops there,
// and none of the aggregate's later events (in the same transaction and
// after) reaches the topic; once the operator raises the topic's limit and
// restarts the relay, the refused event lands before its successors.
func TestRefusedEventKeepsItsPlace(t *testing.T) {
	o := newOutbox(t, "refused", defaultColumns)
	topic := o.name + ".order"
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	ctx := context.Background()
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: "20000"}}}}})
	if err != nil || res.Errors[topic] != nil {
		t.Fatalf("create %s: %v %v", topic, err, res)
	}
	waitLeaders(t, topic)
	r := startRelay(t, o.args("--on-invalid", "fail")...)

	o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 0}`, nil)
	consume(t, []string{topic}, 1, time.Minute)
	// Incompressible, so that the record is over the topic's limit even
	// compressed (lz4 is the default), and under the relay's.
	noise := make([]byte, 60_000)
	_, _ = rand.Read(noise)
	rows := []row{{ID: uuid.NewString(), AggregateType: "order", AggregateID: "o-1", EventType: "created",
		Payload: `{"n": 1, "blob": "` + base64.StdEncoding.EncodeToString(noise) + `"}`}}
	const events = 30
	for n := 2; n < events; n++ {
		rows = append(rows, row{ID: uuid.NewString(), AggregateType: "order", AggregateID: "o-1", EventType: "created", Payload: fmt.Sprintf(`{"n": %d}`, n)})
	}
	if err := o.insertTx(ctx, rows[:events/2], true); err != nil {
		t.Fatal(err)
	}
	// Past the refused event's commit record: a slot confirmed here would
	// skip its transaction. (A slot confirmed before the commit is not:
	// while the big row's WAL is read, an idle keepalive may confirm a
	// position inside the uncommitted transaction, which Postgres replays
	// whole, since its commit comes after.)
	held := o.CurrentLSN(t)
	if err := o.insertTx(ctx, rows[events/2:], true); err != nil {
		t.Fatal(err)
	}
	r.waitFailure(t, time.Minute, "an event the topic refuses, with --on-invalid=fail")
	if c := o.Confirmed(t); c >= held {
		t.Errorf("slot confirmed %s, past the refused event's transaction (its commit ends before %s)", c, held)
	}
	before := consume(t, []string{topic}, 1, time.Minute) // the relay is gone: this is all
	if len(before) != 1 {
		var ns []string
		for _, m := range sortedByOffset(before) {
			ns = append(ns, string(m.Value[:min(len(m.Value), 12)]))
		}
		t.Errorf("the topic holds %d events after the refusal, want only the one before it: %v", len(before), ns)
	}

	// The operator raises the topic's limit and restarts the relay.
	ares, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "max.message.bytes", Value: "2000000", ConfigOperation: kafka.ConfigOperationSet}}}}})
	if err != nil || len(ares.Resources) != 1 || ares.Resources[0].Error != nil {
		t.Fatalf("raise max.message.bytes of %s: %v %+v", topic, err, ares)
	}
	r2 := startRelay(t, o.args("--on-invalid", "fail")...)
	msgs := consume(t, []string{topic}, events, time.Minute)
	checkOrder(t, msgs) // first deliveries of o-1 count n = 0, 1, 2, ...
	first, dups := byID(t, msgs)
	if len(first) != events {
		t.Errorf("%d distinct events, want %d", len(first), events)
	}
	if code := r2.Stop(t, 15, 30*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	t.Logf("after the restart: %d distinct events, %d duplicates", len(first), dups)
}
