package admin

import (
	"context"
	"slices"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// TestCheckOffline validates the configuration and asks no server (none
// is there): no item, and a bad setting is an error.
func TestCheckOffline(t *testing.T) {
	cfg := config(func(c *relay.Config) {
		c.PostgresURL, c.Kafka.Brokers = "postgres://relay:pw@127.0.0.1:1/app", []string{"127.0.0.1:1"}
	}, "public.a", "billing.b")
	r, err := Check(context.Background(), cfg, Offline(true))
	if err != nil || !r.Offline || len(r.Items) != 0 || r.Postgres != "relay@127.0.0.1:1/app" || r.Tables != "public.a,billing.b" {
		t.Errorf("Check offline: %+v, %v", r, err)
	}
	cfg.Stream.MaxInFlight = -1
	if _, err := Check(context.Background(), cfg, Offline(true)); err == nil {
		t.Errorf("Check offline accepted max in flight -1")
	}
}

// TestTopicTemplates: each template once, messages' only when messages
// are relayed; the dead-letter topic only with on-invalid dlq.
func TestTopicTemplates(t *testing.T) {
	cfg := config(func(c *relay.Config) {
		c.Tables[1].Route.Topic, c.Defaults.Route.Topic = "b.{event_type}", "m.{event_type}"
	}, "public.a", "public.b", "public.c")
	if got, want := topicTemplates(cfg), []string{"outbox.event.{aggregate_type}", "b.{event_type}", "m.{event_type}"}; !slices.Equal(got, want) {
		t.Errorf("templates %q, want %q", got, want)
	}
	cfg.Messages.Prefix = ""
	if got := topicTemplates(cfg); len(got) != 2 {
		t.Errorf("templates without messages %q", got)
	}
	if got := deadLetterTopic(cfg); got != "outbox.dlq" {
		t.Errorf("dead-letter topic %q", got)
	}
	cfg.Topics.OnInvalid = relay.OnInvalidFail
	if got := deadLetterTopic(cfg); got != "" {
		t.Errorf("dead-letter topic with on-invalid fail: %q", got)
	}
}

func TestCheckReportFailed(t *testing.T) {
	r := CheckReport{Items: []checklist.Item{{Status: checklist.OK}, {Status: checklist.Fail}, {Status: checklist.Warn}, {Status: checklist.Fail}, {Status: checklist.Skip}}}
	if r.Failed() != 2 {
		t.Errorf("Failed() = %d, want 2", r.Failed())
	}
}
