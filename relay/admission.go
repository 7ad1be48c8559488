package relay

import (
	"log/slog"

	"github.com/outbox-cdc/outbox-cdc/internal/configerr"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// Admission is how run admits the topics that rows route events to: each
// table's route (template, rewrite, allow-list) and the messages' route
// (Defaults.Route), sharing one cap of Topics.Max (Topics.Max), and the
// topics the relay writes itself (sink.Reserved: the dead-letter and
// checkpoint topics, whatever Topics.OnInvalid and Delivery say). Run's
// writer routes by it; `outbox-cdc dlq replay` admits each dead letter by
// it, so that a replay puts nothing where run would not have. Each call
// has a cap of its own (one per process); log gets the cap's one line
// (nil: slog.Default()). It validates what it uses, naming the field, so a
// command that validates only some parts (dlq replay) can call it alone.
func (c Config) Admission(log *slog.Logger) (sink.Admission, error) {
	if c.Topics.Max < 0 {
		return sink.Admission{}, bad("Topics.Max", "{Topics.Max} %d: want 0 (no cap) or more", c.Topics.Max)
	}
	a := sink.Admission{Routes: map[string]sink.Topic{},
		Reserved: sink.Reserved{DeadLetter: c.Topics.DeadLetterTopic, Checkpoint: c.Delivery.CheckpointTopic}}
	limit := sink.NewTopicLimit(c.Topics.Max, log)
	for i, t := range c.Tables {
		topic, err := t.Route.admitted(a.Reserved, "table "+t.Qualified())
		if err != nil {
			return sink.Admission{}, configerr.In(tablePath(i)+".Route", err)
		}
		a.Routes[t.Qualified()] = topic.WithSpec(t.Route.Spec).Limit(limit)
	}
	topic, err := c.Defaults.Route.admitted(a.Reserved, "messages")
	if err != nil {
		return sink.Admission{}, configerr.In("Defaults.Route", err)
	}
	a.Default = topic.Limit(limit)
	return a, nil
}

// validateReserved refuses a fixed topic that is a reserved topic: every
// event of its table would be dead-lettered.
func (c Config) validateReserved() error {
	_, err := c.Admission(slog.New(slog.DiscardHandler))
	return err
}

// admitted is r's topic, validated; of is "table SCHEMA.NAME" or
// "messages". A fixed topic that is reserved is refused.
func (r Route) admitted(reserved sink.Reserved, of string) (sink.Topic, error) {
	if err := r.validate(of); err != nil {
		return sink.Topic{}, err
	}
	topic, err := r.topic()
	if err != nil {
		return sink.Topic{}, bad("Topic", "{Topic} (%s): %w", of, err)
	}
	if name, ok := topic.Fixed(); ok {
		if err := reserved.Refuses(name); err != nil {
			return sink.Topic{}, bad("Topic", "{Topic} %s (%s): %w", name, of, err)
		}
	}
	return topic, nil
}
