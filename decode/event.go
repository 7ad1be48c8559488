package decode

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// Columns names the outbox table's columns that carry each part of an event.
// Headers and Timestamp are optional: when the table lacks them the event has
// no extra headers and takes its commit time.
type Columns struct {
	ID            string
	AggregateType string // empty: the table has none; events have no aggregate type
	AggregateID   string // the key; empty: the table has none, every event has a null key
	EventType     string
	Payload       string
	Headers       string
	Timestamp     string
	// HeaderColumns are further columns sent as headers, in their text
	// form (correlation_id, tenant_id, traceparent, …); NULL is left out.
	HeaderColumns []HeaderColumn
	// TopicColumns are columns the topic template names, {topic} say:
	// their text forms go in Event.Fields (NULL as empty).
	TopicColumns []string
	// NullKey lets a NULL or empty key column give a null key; otherwise
	// the row is invalid (ReasonNullColumn, ReasonEmptyAggregateID).
	NullKey bool
	// NullPayload is what a NULL payload column becomes (--null-payload):
	// an invalid row (NullPayloadDeadLetter, or empty), or a tombstone.
	NullPayload NullPayload
	// Partition is an integer column naming the record's partition
	// (--column-partition); its text goes in Event.Partition, and sink
	// checks it against the topic. Empty: none, records go by their key.
	Partition string
}

// NullPayload is what becomes of a row whose payload column is NULL.
type NullPayload string

// Values of NullPayload.
const (
	// NullPayloadDeadLetter makes such a row invalid (ReasonNullColumn):
	// the default, as a NULL payload is more often a bug than a deletion.
	NullPayloadDeadLetter NullPayload = "dead-letter"
	// NullPayloadTombstone makes it a tombstone: a record with the row's
	// key and headers and a null value, which a compacted topic reads as
	// the deletion of the key. A row without a key (a NULL or empty key
	// column under NullKey) stays invalid: a tombstone without a key
	// deletes nothing.
	NullPayloadTombstone NullPayload = "tombstone"
)

// HeaderColumn maps one column to one Kafka header.
type HeaderColumn struct {
	Column string
	Header string // the header's name; empty: the column's
}

// Name returns the header's name.
func (h HeaderColumn) Name() string {
	if h.Header != "" {
		return h.Header
	}
	return h.Column
}

// Table is one outbox table and how its columns map to an event.
type Table struct {
	Schema, Name string
	Columns      Columns
	// OID identifies the table across ALTER TABLE … RENAME and SET SCHEMA:
	// a Relation message with this id is this table whatever its name
	// (0: unknown, matched by name alone).
	OID uint32
}

// Qualified returns "schema.name".
func (t Table) Qualified() string { return t.Schema + "." + t.Name }

// Event is one outbox row, ready to publish.
type Event struct {
	ID            string
	AggregateType string
	AggregateID   string // the Kafka key; empty: a null key
	EventType     string
	Payload       []byte // the payload column's value, byte for byte (bytea is unhexed); nil for a tombstone
	// Tombstone is a row whose payload is NULL under NullPayloadTombstone:
	// its record's value is null (not empty), and it always has a key.
	Tombstone bool
	// Partition is the text of the partition column (Columns.Partition);
	// empty when the table has none or it is NULL: the key decides.
	Partition  string
	Fields     map[string]string // Columns.TopicColumns' values, for topic routing
	Headers    []Header          // string members of the headers column, sorted by key
	Time       time.Time
	CommitLSN  pglogrepl.LSN // LSN of the commit record of the row's transaction
	CommitTime time.Time     // when the row's transaction committed
	Xid        uint32
	Table      string // the outbox table, schema.name; for a message, "message:" and its prefix
	Message    bool   // written as a logical decoding message, not a row: there is no row to delete
	// ContentType is the payload's media type, from the payload column's
	// type: application/json for json and jsonb, text/plain for text,
	// application/octet-stream for bytea.
	ContentType string
}

// Header is one Kafka header taken from the row.
type Header struct {
	Key   string
	Value []byte
}

// Size is the event's weight in the in-flight window: what it keeps in memory
// until Kafka acknowledges it.
func (e *Event) Size() int64 {
	n := len(e.ID) + len(e.AggregateType) + len(e.AggregateID) + len(e.EventType) + len(e.Payload)
	for _, h := range e.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// Kind says what a decoded message means to the pipeline.
type Kind int

const (
	// KindSkip is a message with no effect on the outbox stream: a Relation,
	// Type or Origin message, a change to another table, an UPDATE, DELETE or
	// TRUNCATE, a logical decoding message with another prefix.
	KindSkip Kind = iota
	// KindBegin starts a transaction.
	KindBegin
	// KindEvent is an INSERT into an outbox table, or a logical decoding
	// message with the decoder's message prefix.
	KindEvent
	// KindCommit ends a transaction; Result.End is the LSN to confirm once its
	// events are acknowledged.
	KindCommit
	// KindHeartbeat is outbox-cdc's own non-transactional logical decoding
	// message (see HeartbeatPrefix); Result.End is its LSN, which may be
	// confirmed when nothing is in flight.
	KindHeartbeat
)

// HeartbeatPrefix is the prefix of the pg_logical_emit_message calls that
// outbox-cdc makes so that an idle outbox still moves its slot forward.
const HeartbeatPrefix = "outbox-cdc.heartbeat"

// Result is what one pgoutput message decodes to.
type Result struct {
	Kind  Kind
	Event Event         // with KindEvent
	End   pglogrepl.LSN // with KindCommit: end of the transaction's commit record; with KindHeartbeat: the message's LSN
	// Standalone is an event (or, with an *InvalidRowError, a dead letter)
	// from a non-transactional message: a transaction of its own, to be
	// confirmed at End once acknowledged.
	Standalone bool
}
