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
		"a.{aggregate}":     "unknown field {aggregate}",
		"a.{aggregate_type": "unclosed {",
		"a}":                "unmatched }",
		"has space":         "Kafka allows only",
	} {
		if _, err := ParseTopic(template); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTopic(%q) = %v, want an error saying %q", template, err, want)
		}
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
