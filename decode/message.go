package decode

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/message"
)

// MessageSource is how an event written as a logical decoding message names
// where it came from, in place of a table: MessageSource + its prefix.
const MessageSource = "message:"

// DecodeMessages makes d turn logical decoding messages with prefix into
// events (see package message); empty, the default, turns it off.
func (d *Decoder) DecodeMessages(prefix string) { d.prefix = prefix }

// message decodes a message with the events' prefix. A transactional one
// belongs to the transaction being received; a non-transactional one is a
// transaction of its own, ending at the message.
func (d *Decoder) message(m *pglogrepl.LogicalDecodingMessage) (Result, error) {
	res := Result{Kind: KindEvent}
	lsn, commitTime, xid := d.commitLSN, d.commitTime, d.xid
	if !m.Transactional {
		res.Standalone, res.End = true, m.LSN
		lsn, commitTime, xid = m.LSN, time.Now(), 0
	}
	source := MessageSource + m.Prefix
	invalid := func(id, reason, detail string) (Result, error) {
		return res, &InvalidRowError{Table: source, ID: id, Reason: reason, Detail: detail, CommitLSN: lsn, Xid: xid,
			Columns: []Column{{Name: "content", Value: bytes.Clone(m.Content)}}, Mapping: Columns{Payload: "content"}}
	}
	me, err := message.Decode(m.Content)
	var fe *message.FormatError
	switch {
	case errors.As(err, &fe):
		return invalid("", fe.Reason, fmt.Sprintf("message %q at %s: %s", m.Prefix, m.LSN, fe.Detail))
	case err != nil:
		return res, err
	case me.AggregateID == "":
		return invalid(me.ID, ReasonEmptyAggregateID, "the aggregate id is empty; it is the Kafka message key")
	}
	ev := Event{
		ID: me.ID, AggregateType: me.AggregateType, AggregateID: me.AggregateID, EventType: me.EventType,
		Payload: me.Payload, Time: me.Time, ContentType: me.ContentType,
		CommitLSN: lsn, CommitTime: commitTime, Xid: xid, Table: source, Message: true,
	}
	for _, h := range me.Headers {
		if !reservedHeaders[h.Key] {
			ev.Headers = append(ev.Headers, Header{Key: h.Key, Value: h.Value})
		}
	}
	slices.SortStableFunc(ev.Headers, func(a, b Header) int { return strings.Compare(a.Key, b.Key) })
	if ev.Time.IsZero() {
		ev.Time = commitTime
	}
	res.Event = ev
	return res, nil
}
