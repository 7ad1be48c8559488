package sink

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

func TestTopicTemplates(t *testing.T) {
	ev := &decode.Event{AggregateType: "Order", EventType: "OrderCreated"}
	for template, want := range map[string]string{
		"outbox.event.{aggregate_type}":  "outbox.event.Order",
		"{aggregate_type}.{event_type}":  "Order.OrderCreated",
		"fixed-topic":                    "fixed-topic",
		"x{event_type}y{aggregate_type}": "xOrderCreatedyOrder",
	} {
		topic, err := ParseTopic(template)
		if err != nil {
			t.Fatalf("ParseTopic(%q): %v", template, err)
		}
		if got := topic.Name(ev); got != want {
			t.Errorf("%q routes to %q, want %q", template, got, want)
		}
	}
	for template, want := range map[string]string{
		"a.{}":              "want {aggregate_type}, {event_type} or {COLUMN}",
		"a.{aggregate_type": "unclosed {",
		"a}":                "unmatched }",
		"has space":         "Kafka allows only",
	} {
		if _, err := ParseTopic(template); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTopic(%q) = %v, want an error saying %q", template, err, want)
		}
	}
}

// TestTopicFromColumnsAndRewrite: {COLUMN} takes the row's column, and a
// rewrite turns names that match it whole, like Debezium's
// route.topic.regex and route.topic.replacement.
func TestTopicFromColumnsAndRewrite(t *testing.T) {
	topic, err := ParseTopic("{message_type}, {assembly_name}")
	if err != nil {
		t.Fatal(err)
	}
	if cols := topic.Columns(); len(cols) != 2 || cols[0] != "message_type" || cols[1] != "assembly_name" {
		t.Errorf("Columns() = %v", cols)
	}
	topic, err = topic.Rewrite(`Company\.Sales\.Contracts\.(\w+), .*`, "sales.$1")
	if err != nil {
		t.Fatal(err)
	}
	for fields, want := range map[[2]string]string{
		{"Company.Sales.Contracts.OrderPaidIntegrationEvent", "Company.Sales.Contracts"}: "sales.OrderPaidIntegrationEvent",
		{"Other.Thing", "Other"}: "Other.Thing, Other", // unmatched: as it is (and then dead-lettered as no topic name)
	} {
		ev := &decode.Event{Fields: map[string]string{"message_type": fields[0], "assembly_name": fields[1]}}
		if got := topic.Name(ev); got != want {
			t.Errorf("%v routes to %q, want %q", fields, got, want)
		}
	}
	if _, err := topic.Rewrite("(", "x"); err == nil {
		t.Error("a regex that does not compile was accepted")
	}
	fixed, _ := ParseTopic("legacy")
	fixed, _ = fixed.Rewrite("legacy", "modern")
	if got := fixed.Name(&decode.Event{}); got != "modern" {
		t.Errorf("a fixed topic rewritten routes to %q, want modern", got)
	}
}

func TestRoutedTopicNamesAreChecked(t *testing.T) {
	for name, ok := range map[string]bool{
		"outbox.event.Order": true, "a_b-c.9": true, "": false, "..": false,
		"bad/name": false, strings.Repeat("x", 250): false, strings.Repeat("x", 249): true,
	} {
		if err := validTopicName(name); (err == nil) != ok {
			t.Errorf("validTopicName(%.20q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// TestTopicAdmission is the router's decision after routing: a name Kafka
// would refuse, then the allow-list, then the cap on topics in use. Topics
// admitted once keep working after the cap is reached; a fixed topic is
// admitted from the start, uncounted; the dead-letter topic is refused,
// uncounted.
func TestTopicAdmission(t *testing.T) {
	limit := NewTopicLimit(2, nil)
	route, err := ParseTopic("ev.{aggregate_type}")
	if err != nil {
		t.Fatal(err)
	}
	if route, err = route.Allow(`ev\.(order|invoice|payment)`); err != nil {
		t.Fatal(err)
	}
	route = route.Limit(limit)
	fixed, _ := ParseTopic("legacy")
	fixed = fixed.Limit(limit) // reserved: does not wait for room
	free, _ := ParseTopic("{aggregate_type}")
	free = free.Limit(limit)
	for i, step := range []struct {
		route  Topic
		value  string
		reason string
	}{
		{route, "order", ""},
		{route, "shipment", ReasonTopicNotAllowed}, // anchored: ev.shipment is not listed
		{route, "order.x", ReasonTopicNotAllowed},  // the whole name must match
		{route, "invoice", ""},
		{route, "payment", ReasonTopicLimit}, // allowed, but two topics are in use
		{route, "order", ""},                 // in use: keeps working
		{route, "invoice", ""},
		{route, "payment", ReasonTopicLimit},
		{route, "a b", ReasonInvalidTopic},
		{fixed, "", ""},
		{free, "dlq", ReasonTopicNotAllowed}, // the dead-letter topic: never an event's, never counted
		{free, "other", ReasonTopicLimit},
	} {
		ev := &decode.Event{AggregateType: step.value}
		name := step.route.Name(ev)
		perr := step.route.Admit(name, Reserved{DeadLetter: "dlq"})
		switch {
		case step.reason == "" && perr != nil:
			t.Errorf("step %d: %s refused: %v", i, name, perr)
		case step.reason != "" && (perr == nil || perr.Reason != step.reason):
			t.Errorf("step %d: %s: %v, want reason %s", i, name, perr, step.reason)
		case perr != nil && (perr.Topic != name || perr.Transient):
			t.Errorf("step %d: %+v: want a permanent error naming %s", i, perr, name)
		}
	}
	if n := limit.Len(); n != 2 {
		t.Errorf("%d topics counted, want 2 (order and invoice; the fixed legacy is not counted)", n)
	}
	if _, err := route.Allow("("); err == nil {
		t.Error("an allow-list that does not compile was accepted")
	}
	if _, err := fixed.Allow(`ev\..*`); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("a fixed topic the allow-list refuses: %v, want an error naming it", err)
	}
	unlimited, _ := ParseTopic("{aggregate_type}")
	unlimited = unlimited.Limit(NewTopicLimit(0, nil))
	for i := range 5000 {
		if perr := unlimited.Admit(fmt.Sprintf("t%d", i), Reserved{}); perr != nil {
			t.Fatalf("no cap (0) refused a topic: %v", perr)
		}
	}
}

// TestWriterBoundsTopics routes 60 distinct aggregate types, then a second
// event of each, through a writer with an allow-list and a cap of 5 topics
// on the in-process broker: every event is acknowledged on its topic or
// dead-lettered with the reason of its refusal, only 5 event topics are
// created, and the writer's per-topic state holds those and the
// dead-letter topic alone.
func TestWriterBoundsTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	route, _ := ParseTopic("ev.{aggregate_type}")
	if route, err = route.Allow(`ev\.t[0-9]+`); err != nil {
		t.Fatal(err)
	}
	route = route.Limit(NewTopicLimit(5, nil))
	var mu sync.Mutex
	reasons := map[uint64]string{}
	w := NewWriter(Config{Brokers: cluster.ListenAddrs(), Topic: route, CreateTopics: true, DeadLetterTopic: "dlq",
		MissingTopicTimeout: 10 * time.Second}, func(token uint64, reason string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			reason = "failed: " + err.Error()
		}
		reasons[token] = reason
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	types := make([]string, 0, 60)
	for i := range 50 {
		types = append(types, fmt.Sprintf("t%d", i))
		if i%5 == 0 {
			types = append(types, fmt.Sprintf("u%d", i)) // not allowed
		}
	}
	want := map[uint64]string{}
	for round := range 2 {
		for i, typ := range types {
			token := uint64(round*len(types) + i)
			ev := &decode.Event{ID: fmt.Sprint(token), AggregateType: typ, AggregateID: "k", EventType: "e"}
			if err := w.Publish(ctx, ev, token); err != nil {
				t.Fatalf("publish %d: %v", token, err)
			}
			var n int
			switch _, _ = fmt.Sscanf(typ, "t%d", &n); {
			case typ[0] == 'u':
				want[token] = ReasonTopicNotAllowed
			case n >= 5:
				want[token] = ReasonTopicLimit
			default:
				want[token] = ""
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for token, reason := range want {
		if got, ok := reasons[token]; !ok || got != reason {
			t.Errorf("event %d (%s): reason %q (reported %v), want %q", token, types[int(token)%len(types)], got, ok, reason)
		}
	}
	mu.Unlock()
	md, err := (&kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...)}).Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 6 {
		t.Errorf("%d topics in the cluster, want the 5 admitted and the dead-letter topic", len(md.Topics))
	}
	if kept := w.topicsKept(); kept > 6 {
		t.Errorf("the writer keeps state for %d topics, past the cap", kept)
	}
	dead := 0
	for _, r := range want {
		if r != "" {
			dead++
		}
	}
	if got := w.DeadLettered(); got != int64(dead) {
		t.Errorf("%d dead-lettered, want %d", got, dead)
	}
}
