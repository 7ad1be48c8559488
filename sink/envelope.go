package sink

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// Envelope is what an event looks like on the wire.
type Envelope string

// Envelopes.
const (
	// EnvelopeRaw sends the payload as the value, with the id, event_type
	// and aggregate_type headers and the row's own headers.
	EnvelopeRaw Envelope = "raw"
	// EnvelopeCloudEvents follows the CloudEvents 1.0 Kafka protocol
	// binding in binary mode: the value is still the payload, byte for
	// byte, and the context attributes travel as ce_* headers beside the
	// raw envelope's headers.
	EnvelopeCloudEvents Envelope = "cloudevents"
	// EnvelopeCloudEventsStructured follows the same binding in structured
	// mode: the value is a CloudEvents 1.0 JSON document holding the
	// attributes and the payload (appendCloudEvent), with the header
	// content-type: application/cloudevents+json; charset=UTF-8 beside the
	// raw envelope's headers.
	EnvelopeCloudEventsStructured Envelope = "cloudevents-structured"
	// EnvelopeConnectJSON is Kafka Connect's JsonConverter format with
	// schemas.enable=true: a struct schema and its value, the outbox
	// columns as fields (see connectSchemaHead), for sink connectors; the
	// raw envelope's headers stay.
	EnvelopeConnectJSON Envelope = "connect-json"
)

// Envelopes lists every Envelope: a new format is a constant above, its
// file (envelope_NAME.go), its cases in this package, and its place here.
var Envelopes = []Envelope{EnvelopeRaw, EnvelopeCloudEvents, EnvelopeCloudEventsStructured, EnvelopeConnectJSON}

// Validate refuses an Envelope that is none of Envelopes, naming them.
func (e Envelope) Validate() error {
	if slices.Contains(Envelopes, e) {
		return nil
	}
	names := make([]string, len(Envelopes))
	for i, n := range Envelopes {
		names[i] = string(n)
	}
	return fmt.Errorf("%q: want %s or %s", e, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// Timestamp is where a record's timestamp comes from.
type Timestamp string

// Timestamps.
const (
	// TimestampColumn is the row's timestamp column (decode.Event.Time),
	// or the commit time when the table has none. created_at's now() is
	// fixed when the writer's transaction starts, so records of one
	// partition can go back in time: a transaction that started earlier
	// may commit later.
	TimestampColumn Timestamp = "column"
	// TimestampCommit is the commit time of the row's transaction, as
	// Postgres reports it (decode.Event.CommitTime): on one server it does
	// not decrease in commit order, which is each partition's order, but
	// for a clock stepped back or a failover to a server whose clock is
	// behind.
	TimestampCommit Timestamp = "commit"
)

// shape turns an event into its record: value, headers and timestamp,
// under the configured envelope. It is the envelope's room, apart from
// routing and sending: immutable once built, so every goroutine reads it
// without a lock, and it is tested without a broker.
type shape struct {
	envelope        Envelope
	timestamp       Timestamp
	metadataHeaders bool   // Config.MetadataHeaders
	source          string // Config.CloudEventsSource; empty: from the table
	expand          bool   // Config.ConnectExpandPayload
	maxBytes        int    // Config.MaxMessageBytes: no value larger is built
}

// shapeOf returns cfg's record shape.
func shapeOf(cfg Config) shape {
	s := shape{envelope: cfg.Envelope, timestamp: cfg.Timestamp, metadataHeaders: cfg.MetadataHeaders,
		source: cfg.CloudEventsSource, expand: cfg.ConnectExpandPayload, maxBytes: cfg.MaxMessageBytes}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxMessageBytes
	}
	return s
}

// recordTime is ev's record timestamp under the shape's Timestamp.
func (s shape) recordTime(ev *decode.Event) time.Time {
	if s.timestamp == TimestampCommit {
		return ev.CommitTime
	}
	return ev.Time
}

// value is ev's record value under the shape's envelope, unless it is
// larger than --max-message-bytes (maxBytes): then value is nil, fits
// false, and n its size or a lower bound of it, found without building it.
// An event's value costs a small multiple of maxBytes whatever its
// payload's size (M below is maxBytes; the payload itself is the
// decoder's, and raw envelopes never copy it):
//   - a payload whose smallest form cannot fit (valueFloor) costs nothing;
//   - cloudevents-structured and connect-json measure the form they write
//     the payload in before writing it (allocation-free passes: UTF-8 and
//     JSON validity, sizes), and allocate the value, at most M, once;
//   - connect-json expanding JSON copies the payload compacted (at most
//     M), holds a schema node per distinct place in it (at most M/32 nodes
//     of 40 bytes, 1.25M, and the slice's growth), and writes the value
//     (at most M, 2M with its growth), falling back to the string form
//     (as above) when the expanded value would not fit.
//
// So at most about 2M for every envelope but connect-json expanding JSON,
// and about 6M for that (TestOversizedPayloadDeadLetteredCheaply and
// TestValueAllocationBounded measure it).
func (s shape) value(ev *decode.Event) (value []byte, n int, fits bool) {
	if n = s.valueFloor(ev); n > s.maxBytes {
		return nil, n, false
	}
	switch {
	case ev.Tombstone:
		return nil, 0, true
	case s.envelope == EnvelopeCloudEventsStructured:
		return s.cloudEventValue(ev, s.maxBytes)
	case s.envelope == EnvelopeConnectJSON:
		return s.connectValue(ev, s.maxBytes)
	case ev.Payload == nil:
		return []byte{}, 0, true
	}
	return ev.Payload, len(ev.Payload), true
}

// valueFloor is a lower bound of ev's record value's size under the
// shape's envelope, found without building it, nor copying the payload:
// the payload's size for the raw and binary CloudEvents envelopes, whose
// value it is; for the structured ones, the payload's smallest form
// (compactLen: no JSON string or base64 of it is smaller) beside the
// columns that go in every one of them (id, event_type, aggregate_id).
func (s shape) valueFloor(ev *decode.Event) int {
	switch {
	case ev.Tombstone:
		return 0
	case s.envelope == EnvelopeCloudEventsStructured, s.envelope == EnvelopeConnectJSON:
		return compactLen(ev.Payload) + len(ev.ID) + len(ev.EventType) + len(ev.AggregateID)
	}
	return len(ev.Payload)
}

// recordValue is ev's record value under the shape's envelope: nil,
// which Kafka keeps as a null value, for a tombstone alone, so that
// compaction deletes its key (no envelope: a structured one would not be
// a tombstone); a payload that is empty stays an empty value, or an
// envelope with empty data. A value larger than maxBytes is nil too:
// callers that may meet one ask value.
func (s shape) recordValue(ev *decode.Event) []byte {
	v, _, _ := s.value(ev)
	return v
}

// deadLetterValue is the value of ev's dead letter: under a structured
// envelope its record value, which its headers (content-type) announce, so
// that a replay (package dlq) publishes the record it would have been;
// otherwise the payload as it is. fits and n are value's: a value that
// cannot fit is not built, and its dead letter goes without it.
func (s shape) deadLetterValue(ev *decode.Event) (value []byte, n int, fits bool) {
	if s.envelope == EnvelopeCloudEventsStructured || s.envelope == EnvelopeConnectJSON {
		return s.value(ev)
	}
	return ev.Payload, len(ev.Payload), len(ev.Payload) <= s.maxBytes
}

// Ordering metadata headers (Config.MetadataHeaders), for consumers that
// order or audit by transaction.
const (
	HeaderCommitLSN  = "outbox_cdc.commit_lsn"  // the commit LSN of the row's transaction, as Postgres prints it (0/16B3748)
	HeaderXid        = "outbox_cdc.xid"         // the transaction id
	HeaderCommitTime = "outbox_cdc.commit_time" // the commit time, RFC 3339 with nanoseconds, UTC
)

// CloudEvents attributes in binary mode (the Kafka protocol binding, 3.2).
const (
	ceSpecVersion = "1.0"
	HeaderCEID    = "ce_id"
	HeaderCEType  = "ce_type"
)

// headers returns the Kafka headers of ev under the shape's envelope: the
// relay's, then the row's own, those named as the relay's renamed
// (appendRowHeaders).
func (s shape) headers(ev *decode.Event) []producer.Header {
	n := 3 + len(ev.Headers)
	switch s.envelope {
	case EnvelopeCloudEvents:
		n += 8
	case EnvelopeCloudEventsStructured:
		n++
	}
	if s.metadataHeaders {
		n += 3
	}
	hs := make([]producer.Header, 0, n)
	hs = append(hs,
		producer.Header{Key: "id", Value: []byte(ev.ID)},
		producer.Header{Key: "event_type", Value: []byte(ev.EventType)},
	)
	if ev.AggregateType != "" { // a table without the column: no header
		hs = append(hs, producer.Header{Key: "aggregate_type", Value: []byte(ev.AggregateType)})
	}
	switch s.envelope {
	case EnvelopeCloudEventsStructured:
		if !ev.Tombstone { // a null value is no CloudEvent: nothing to parse
			hs = append(hs, producer.Header{Key: "content-type", Value: contentTypeCloudEvents})
		}
	case EnvelopeCloudEvents:
		source := s.cloudEventSource(ev)
		hs = append(hs,
			producer.Header{Key: "ce_specversion", Value: []byte(ceSpecVersion)},
			producer.Header{Key: HeaderCEID, Value: []byte(ev.ID)},
			producer.Header{Key: "ce_source", Value: []byte(source)},
			producer.Header{Key: HeaderCEType, Value: []byte(ev.EventType)},
			producer.Header{Key: "ce_time", Value: []byte(ev.Time.UTC().Format(time.RFC3339Nano))},
			producer.Header{Key: "content-type", Value: []byte(ev.ContentType)},
		)
		if ev.AggregateID != "" { // a null key has neither
			hs = append(hs, producer.Header{Key: "ce_subject", Value: []byte(ev.AggregateID)},
				producer.Header{Key: "ce_partitionkey", Value: []byte(ev.AggregateID)})
		}
	}
	if s.metadataHeaders {
		hs = append(hs,
			producer.Header{Key: HeaderCommitLSN, Value: []byte(ev.CommitLSN.String())},
			producer.Header{Key: HeaderXid, Value: []byte(strconv.FormatUint(uint64(ev.Xid), 10))},
			producer.Header{Key: HeaderCommitTime, Value: []byte(ev.CommitTime.UTC().Format(time.RFC3339Nano))},
		)
	}
	return s.appendRowHeaders(hs, ev)
}
