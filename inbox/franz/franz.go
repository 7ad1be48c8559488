// Package franz reads inbox records from twmb/franz-go records. It lives
// apart from package inbox so that a service consuming with another client
// never compiles franz-go.
package franz

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/inbox"
)

// FromRecord is inbox.FromHeaders for a franz-go record; its error wraps
// inbox.ErrNoID when r has no id header.
func FromRecord(r *kgo.Record) (inbox.Record, error) {
	return inbox.FromHeaders(r.Topic, r.Partition, r.Offset, func(yield func(string, []byte) bool) {
		for _, h := range r.Headers {
			if !yield(h.Key, h.Value) {
				return
			}
		}
	})
}
