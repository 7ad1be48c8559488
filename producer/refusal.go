package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/segmentio/kafka-go"
)

// Reasons Kafka refuses a record for what it is, carried in dead-letter
// headers (the caller's reasons beside them are its own).
const (
	ReasonInvalidTopic    = "invalid_topic"     // the routed topic name breaks Kafka's rules
	ReasonMessageTooLarge = "message_too_large" // over --max-message-bytes, or refused by the broker as too large
	ReasonTopicMissing    = "topic_missing"     // the topic does not exist and is not created
	ReasonInvalidRecord   = "invalid_record"    // the broker refused the record itself
	// The row's partition column (--column-partition) names a partition
	// the topic does not have: negative, or at or past its count.
	ReasonPartitionOutOfRange = "partition_out_of_range"
	// The row's partition column's text is not an integer.
	ReasonInvalidPartition = "invalid_partition"
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

// Classify returns err as an *Error: a copy of the one it wraps, or the
// Kafka error it holds classified as transient, refused for a Reason, or
// neither.
func Classify(err error) *Error {
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

// ErrorKind names a produce failure for metrics, from a bounded set: the
// Kafka error code's name, "timeout" or "network".
func ErrorKind(err error) string {
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
