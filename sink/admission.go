package sink

import (
	"fmt"
	"strings"
)

// Admission is how a relay admits the topics events are routed to: each
// table's route (its template, rewrite, allow-list and the cap they share)
// and the topics reserved for the relay itself. Run's writer holds the
// same routes (Config.Topic, Config.Topics, Config.Reserved); dlq replay
// admits each dead letter by an Admission, through the same Topic.Admit.
type Admission struct {
	Routes   map[string]Topic // by table, schema.table (Config.Topics)
	Default  Topic            // any other table, and messages (Config.Topic)
	Reserved Reserved
}

// Admit decides whether an event of table may go to the topic name, as
// the writer decides it (see Topic.Admit).
func (a Admission) Admit(table, name string) *Error {
	route, ok := a.Routes[table]
	if !ok {
		route = a.Default
	}
	return route.Admit(name, a.Reserved)
}

// Admit decides, after routing, whether an event may go to the topic
// name: nil, or the permanent *Error it is dead-lettered with. A name
// Kafka refuses (ReasonInvalidTopic), a reserved one (r.Refuses:
// ReasonTopicNotAllowed, whatever the allow-list says), one the allow-list
// does not match (ReasonTopicNotAllowed), and a new one beyond the cap
// (ReasonTopicLimit) are refused, in that order: a refused name is never
// counted. Run's writer admits every event by it, and a replay of dead
// letters (package dlq) every dead letter, so that a replay cannot put
// anywhere what run would have refused. Dead letters themselves do not
// come here.
func (t Topic) Admit(name string, r Reserved) *Error {
	if err := validTopicName(name); err != nil {
		return &Error{Topic: name, Err: err, Reason: ReasonInvalidTopic}
	}
	if err := r.Refuses(name); err != nil {
		return &Error{Topic: name, Reason: ReasonTopicNotAllowed, Err: err}
	}
	if t.allow != nil && !t.allow.MatchString(name) {
		return &Error{Topic: name, Reason: ReasonTopicNotAllowed,
			Err: fmt.Errorf("topic %s does not match the allow-list %s (--topic-allow)", name, t.allow)}
	}
	if t.limit != nil && !t.limit.admit(name) {
		return &Error{Topic: name, Reason: ReasonTopicLimit,
			Err: fmt.Errorf("topic %s would be one more than the %d topics in use (--max-topics)", name, t.limit.max)}
	}
	return nil
}

// Reserved are the topics that the relay itself writes, which no event
// may be routed to, whatever its route's template, rewrite, column or
// allow-list says:
//   - the dead-letter topic: a row's record there would be a dead letter
//     it forged, headers and all, that dlq replay trusts. Reserved also
//     when --on-invalid=fail writes no dead letter, since the dlq commands
//     read it all the same.
//   - the checkpoint topic of exactly-once: a row's record there would
//     take sequence numbers of the checkpoint's partition (the
//     checkpoint record then dropped as a duplicate), or be read at the
//     next start as the last checkpoint, under the slot's key, skipping
//     transactions. Reserved also in at-least-once delivery: a later
//     switch to exactly-once reads what the topic holds.
//   - every name beginning with "__": Kafka's own topics
//     (__consumer_offsets, __transaction_state, KRaft's
//     __cluster_metadata) and those of tools built on it. Brokers refuse
//     produce requests to their internal topics, but --create-topics
//     would still create a look-alike, and rows have no business naming
//     any of them: an outbox's topics are its aggregates'.
type Reserved struct {
	DeadLetter string // --dlq-topic; empty: none
	Checkpoint string // --checkpoint-topic; empty: none
}

// Refuses says why no event may be routed to name, or nil when one may.
func (r Reserved) Refuses(name string) error {
	switch {
	case name == r.DeadLetter:
		return fmt.Errorf("topic %s is the dead-letter topic (--dlq-topic): an event is never routed there", name)
	case name == r.Checkpoint:
		return fmt.Errorf("topic %s is the checkpoint topic (--checkpoint-topic): an event is never routed there", name)
	case strings.HasPrefix(name, "__"):
		return fmt.Errorf("topic %s begins with __, as Kafka's internal topics do: an event is never routed there", name)
	}
	return nil
}
