package sink

import (
	"strings"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// RowHeaderPrefix renames a row's header (from the headers column or a
// header column) that is named as one the relay writes itself: the
// relay's own names are reserved (see shape.reserved), so that a row
// cannot forge them. A consumer reading the last header of a name (Java's
// Headers.lastHeader, the CloudEvents SDKs' binary-mode readers) would
// read the row's instead of the relay's; renaming, rather than dropping,
// keeps what the writer put in the row, under a name no reader mistakes
// for the relay's.
const RowHeaderPrefix = "x-row-"

// reserved says whether a row's header named name would pass for one the
// relay writes under the shape's envelope: outbox_cdc.* (the metadata and
// dead-letter headers) and id, event_type and aggregate_type always; ce_*
// and content-type under either CloudEvents envelope. Names are compared
// without regard to ASCII case: Kafka's are case-sensitive, but some
// readers fold them (HTTP bridges, CloudEvents SDKs matching prefixes),
// and a name differing only in case is no use but to mislead.
func (s shape) reserved(name string) bool {
	if hasPrefixFold(name, "outbox_cdc.") || strings.EqualFold(name, "id") ||
		strings.EqualFold(name, "event_type") || strings.EqualFold(name, "aggregate_type") {
		return true
	}
	switch s.envelope {
	case EnvelopeCloudEvents, EnvelopeCloudEventsStructured:
		return hasPrefixFold(name, "ce_") || strings.EqualFold(name, "content-type")
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// appendRowHeaders appends ev's own headers to hs, each reserved name
// renamed with RowHeaderPrefix.
func (s shape) appendRowHeaders(hs []producer.Header, ev *decode.Event) []producer.Header {
	for _, h := range ev.Headers {
		key := h.Key
		if s.reserved(key) {
			key = RowHeaderPrefix + key
		}
		hs = append(hs, producer.Header{Key: key, Value: h.Value})
	}
	return hs
}

// renamedRowHeaders counts ev's own headers that appendRowHeaders renames.
func (s shape) renamedRowHeaders(ev *decode.Event) int {
	n := 0
	for _, h := range ev.Headers {
		if s.reserved(h.Key) {
			n++
		}
	}
	return n
}
