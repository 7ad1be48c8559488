// Package kafkago reads inbox records from segmentio/kafka-go messages. It
// lives apart from package inbox so that a service consuming with another
// client never compiles kafka-go.
package kafkago

import (
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/inbox"
)

// FromMessage is inbox.FromHeaders for a kafka-go message; its error wraps
// inbox.ErrNoID when m has no id header.
func FromMessage(m kafka.Message) (inbox.Record, error) {
	// kafka-go's Partition is an int; Kafka's partition numbers are int32.
	return inbox.FromHeaders(m.Topic, int32(m.Partition), m.Offset, func(yield func(string, []byte) bool) {
		for _, h := range m.Headers {
			if !yield(h.Key, h.Value) {
				return
			}
		}
	})
}
