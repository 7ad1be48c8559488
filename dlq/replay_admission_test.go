package dlq

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/sink"
)

// deadLetter is a record of the dead-letter topic as a relay wrote it:
// its own headers first (reason, table, topic), then the row's, which in
// versions before rows were kept from outbox_cdc.* headers could repeat
// the relay's with values of the row's choosing.
type deadLetter struct {
	id, reason, table string
	headers           []string // key, value, ...: after the relay's own
	topic             string   // outbox_cdc.topic; empty: none
}

func (d deadLetter) message() kafka.Message {
	m := kafka.Message{Key: []byte("k-" + d.id), Value: []byte(`{"id":"` + d.id + `"}`)}
	hs := []string{sink.HeaderReason, d.reason, sink.HeaderError, "refused", sink.HeaderTable, d.table, sink.HeaderLSN, "0/1"}
	if d.topic != "" {
		hs = append(hs, sink.HeaderTopic, d.topic)
	}
	hs = append(append(hs, "id", d.id), d.headers...)
	for i := 0; i < len(hs); i += 2 {
		m.Headers = append(m.Headers, kafka.Header{Key: hs[i], Value: []byte(hs[i+1])})
	}
	return m
}

// runAdmission is a run's admission: ev.order and ev.invoice allowed for
// public.outbox and messages, billing.* for billing.outbox, a cap of max
// topics, the dead-letter topic dlq and the checkpoint topic ckpt
// reserved.
func runAdmission(t *testing.T, max int) sink.Admission {
	t.Helper()
	route := func(allow string) sink.Topic {
		topic, err := sink.ParseTopic("{aggregate_type}")
		if err == nil {
			topic, err = topic.Allow(allow)
		}
		if err != nil {
			t.Fatal(err)
		}
		return topic
	}
	limit := sink.NewTopicLimit(max, slog.New(slog.DiscardHandler))
	return sink.Admission{
		Routes:   map[string]sink.Topic{"billing.outbox": route(`billing\..*`).Limit(limit)},
		Default:  route(`ev\.(order|invoice)|payments\.commands|dlq|ckpt|__consumer_offsets`).Limit(limit),
		Reserved: sink.Reserved{DeadLetter: "dlq", Checkpoint: "ckpt"},
	}
}

// TestReplayAdmitsAsRun: a replay admits each dead letter's topic as run
// does, by the same allow-lists (its table's), cap and reserved topics,
// and skips what run would refuse with run's reason; --to-topic too. The
// topic comes from the relay's own header: a dead letter whose row
// repeated outbox_cdc.topic with another value is skipped, not replayed
// where the row said.
func TestReplayAdmitsAsRun(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(1, "dlq", "ckpt", "ev.order", "ev.invoice", "ev.payments", "payments.commands", "billing.x"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	letters := []deadLetter{
		{id: "allowed", reason: sink.ReasonMessageTooLarge, table: "public.outbox", topic: "ev.order"},
		{id: "not-allowed", reason: sink.ReasonTopicNotAllowed, table: "public.outbox", topic: "ev.payments"},
		{id: "forged-topic", reason: sink.ReasonMessageTooLarge, table: "public.outbox", topic: "ev.order",
			headers: []string{sink.HeaderTopic, "payments.commands"}},
		{id: "repeated-alike", reason: sink.ReasonMessageTooLarge, table: "public.outbox", topic: "ev.order",
			headers: []string{sink.HeaderTopic, "ev.order"}},
		{id: "to-dlq", reason: sink.ReasonInvalidTopic, table: "public.outbox", headers: []string{sink.HeaderTopic, "dlq"}},
		{id: "to-ckpt", reason: sink.ReasonTopicMissing, table: "public.outbox", topic: "ckpt"},
		{id: "internal", reason: sink.ReasonTopicMissing, table: "public.outbox", topic: "__consumer_offsets"},
		{id: "billing-elsewhere", reason: sink.ReasonTopicMissing, table: "billing.outbox", topic: "ev.order"},
		{id: "billing", reason: sink.ReasonTopicMissing, table: "billing.outbox", topic: "billing.x"},
		{id: "second-topic", reason: sink.ReasonTopicMissing, table: "public.outbox", topic: "ev.invoice"},
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "dlq", BatchTimeout: time.Millisecond}
	for _, d := range letters {
		if err := w.WriteMessages(ctx, d.message()); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	cfg := Config{Brokers: brokers, Topic: "dlq", Admission: runAdmission(t, 2)}
	rep, err := Replay(ctx, cfg, Everything, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"allowed":           WouldReplay + " ev.order",
		"not-allowed":       Skipped + " " + sink.ReasonTopicNotAllowed,
		"forged-topic":      Skipped + " " + sink.HeaderTopic,
		"repeated-alike":    WouldReplay + " ev.order",
		"to-dlq":            Skipped + " " + sink.ReasonTopicNotAllowed,
		"to-ckpt":           Skipped + " " + sink.ReasonTopicNotAllowed,
		"internal":          Skipped + " " + sink.ReasonTopicNotAllowed,
		"billing-elsewhere": Skipped + " " + sink.ReasonTopicNotAllowed, // its table's allow-list, not the default's
		"billing":           WouldReplay + " billing.x",
		"second-topic":      Skipped + " " + sink.ReasonTopicLimit, // ev.order and billing.x fill the cap of 2
	}
	checkOutcomes(t, rep, want)

	// --to-topic goes through admission too.
	rep, err = Replay(ctx, Config{Brokers: brokers, Topic: "dlq", Admission: runAdmission(t, 2)}, Selection{Offsets: Range{From: 0, To: 1}}, Options{ToTopic: "ev.payments"})
	if err != nil {
		t.Fatal(err)
	}
	checkOutcomes(t, rep, map[string]string{
		"allowed":     Skipped + " " + sink.ReasonTopicNotAllowed,
		"not-allowed": Skipped + " " + sink.ReasonTopicNotAllowed,
	})
	// Nothing but the replayable reaches a topic.
	if _, err := Replay(ctx, cfg, Everything, Options{}); err != nil {
		t.Fatal(err)
	}
	for topic, n := range map[string]int{"ev.order": 2, "ev.payments": 0, "payments.commands": 0, "ckpt": 0, "dlq": len(letters), "billing.x": 1} {
		if got := len(readTopic(ctx, t, brokers, topic)); got != n {
			t.Errorf("%s holds %d records after the replay, want %d", topic, got, n)
		}
	}
}

// checkOutcomes compares each outcome, by its dead letter's id, with want:
// the action, then the topic, or for a skipped one what it was refused by.
func checkOutcomes(t *testing.T, rep *Report, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, o := range rep.Outcomes {
		switch {
		case o.Action == Skipped && o.Refused != "":
			got[o.ID] = o.Action + " " + o.Refused
		case o.Action == Skipped && o.Conflict != "":
			got[o.ID] = o.Action + " " + o.Conflict
		case o.Action == Skipped:
			got[o.ID] = o.Action + " (" + o.Why + ")"
		default:
			got[o.ID] = o.Action + " " + o.To
		}
		if o.Action == Skipped && o.Refused != "" && !strings.Contains(o.Why, o.Refused) {
			t.Errorf("%s: why %q does not name the reason %s", o.ID, o.Why, o.Refused)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: %q, want %q", id, got[id], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d outcomes, want %d: %v", len(got), len(want), got)
		}
	}
}
