package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Reasons an event cannot be published, carried in dead-letter headers.
const (
	ReasonInvalidTopic    = "invalid_topic"     // the routed topic name breaks Kafka's rules
	ReasonMessageTooLarge = "message_too_large" // over --max-message-bytes, or refused by the broker as too large
	ReasonTopicMissing    = "topic_missing"     // the topic does not exist and is not created
	ReasonInvalidRecord   = "invalid_record"    // the broker refused the record itself
	ReasonTopicNotAllowed = "topic_not_allowed" // the routed topic does not match --topic-allow
	ReasonTopicLimit      = "topic_limit"       // a new topic while --max-topics are in use
	// The row's partition column (--column-partition) names a partition
	// the topic does not have: negative, or at or past its count.
	ReasonPartitionOutOfRange = "partition_out_of_range"
	// The row's partition column's text is not an integer.
	ReasonInvalidPartition = "invalid_partition"
	// The payload does not meet its event type's contract (--contracts);
	// HeaderContractError says where.
	ReasonContractViolation = "contract_violation"
	// The event type has no contract, and --contracts-unknown=dead-letter.
	ReasonContractMissing = "contract_missing"
	// Checking the payload against its contract would take more steps
	// than its budget (a contract whose anyOf or oneOf recurses can take
	// time exponential in the payload's nesting): it was not validated.
	ReasonContractBudget = "contract_budget_exceeded"
	// The schema registry (--schema-registry) refused the event type's
	// contract under the topic's subject: incompatible with its latest
	// version, or invalid; HeaderRegistryError holds its answer.
	ReasonSchemaRegistryRefused = "schema_registry_refused"
)

// Error is a failed publish, classified once here so that callers branch on
// Transient and Reason rather than on broker error codes or strings.
type Error struct {
	Topic     string
	Err       error
	Transient bool   // the same message may succeed later
	Reason    string // set when the event itself can never be published as it is
}

func (e *Error) Error() string {
	if e.Topic != "" {
		return fmt.Sprintf("publish to %s: %v", e.Topic, e.Err)
	}
	return fmt.Sprintf("publish: %v", e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Retriable answers the relay's retry loop: a new session may publish the
// event when the failure was transient (a broker away, a leader moving),
// not when the event or its topic was refused.
func (e *Error) Retriable() bool { return e.Transient }

func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		return &c
	}
	var wes kafka.WriteErrors
	if errors.As(err, &wes) {
		for _, we := range wes {
			if we != nil {
				err = we
				break
			}
		}
	}
	var mtl kafka.MessageTooLargeError
	var kerr kafka.Error
	switch {
	case errors.As(err, &mtl):
		return &Error{Err: err, Reason: ReasonMessageTooLarge}
	case errors.As(err, &kerr):
		switch kerr {
		case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge:
			return &Error{Err: err, Reason: ReasonMessageTooLarge}
		case kafka.InvalidRecord:
			return &Error{Err: err, Reason: ReasonInvalidRecord}
		case kafka.InvalidTopic:
			return &Error{Err: err, Reason: ReasonInvalidTopic}
		}
		return &Error{Err: err, Transient: kerr.Temporary()}
	case errors.Is(err, context.Canceled):
		return &Error{Err: err}
	default:
		// Network failures, timeouts, a closed connection: the broker may
		// come back.
		return &Error{Err: err, Transient: true}
	}
}

// errorKind names a produce failure for metrics, from a bounded set: the
// Kafka error code's name, "timeout" or "network".
func errorKind(err error) string {
	var kerr kafka.Error
	var nerr net.Error
	switch {
	case errors.As(err, &kerr):
		return strings.ReplaceAll(strings.ToLower(kerr.Title()), " ", "_")
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	}
	return "network"
}

// missingTopics remembers since when each topic has been missing, across
// calls of write: a call is cut short at every status deadline and made
// again. A topic missing for longer than the timeout is reported at once for
// another minute, so that its events do not each wait the timeout out.
type missingTopics struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// lost records topic as missing and returns for how long it has been.
func (m *missingTopics) lost(topic string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.since[topic]
	if !ok {
		if len(m.since) >= 1024 {
			clear(m.since)
		}
		since = time.Now()
		m.since[topic] = since
	}
	return time.Since(since)
}

// known reports whether topic has been missing for over timeout, and not
// for so long that it is worth asking again.
func (m *missingTopics) known(topic string, timeout time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.since[topic]
	if ok && time.Since(since) > timeout+time.Minute {
		delete(m.since, topic)
		return false
	}
	return ok && time.Since(since) >= timeout
}

func (m *missingTopics) found(topic string) {
	m.mu.Lock()
	delete(m.since, topic)
	m.mu.Unlock()
}
