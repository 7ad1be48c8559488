package sink

import (
	"strings"
	"testing"

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
