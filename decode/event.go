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
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       string
	Headers       string
	Timestamp     string
}

// Event is one outbox row, ready to publish.
type Event struct {
	ID            string
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       []byte   // the payload column's value, byte for byte (bytea is unhexed)
	Headers       []Header // string members of the headers column, sorted by key
	Time          time.Time
	CommitLSN     pglogrepl.LSN // LSN of the commit record of the row's transaction
	CommitTime    time.Time     // when the row's transaction committed
	Xid           uint32
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
	// TRUNCATE, a logical decoding message.
	KindSkip Kind = iota
	// KindBegin starts a transaction.
	KindBegin
	// KindEvent is an INSERT into the outbox table.
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
}
