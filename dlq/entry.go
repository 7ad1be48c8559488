package dlq

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// Entry is one record of the dead-letter topic, as its headers describe it.
type Entry struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time"`
	Reason    string    `json:"reason"`          // outbox_cdc.reason; empty: not a dead letter outbox-cdc wrote
	Error     string    `json:"error,omitempty"` // outbox_cdc.error
	Topic     string    `json:"topic,omitempty"` // outbox_cdc.topic: the topic it was meant for; empty: not known
	Table     string    `json:"table,omitempty"`
	LSN       string    `json:"lsn,omitempty"`
	ID        string    `json:"id,omitempty"`
	Key       string    `json:"key"`
	NullKey   bool      `json:"null_key,omitempty"`
	Size      int       `json:"size"`                // bytes of the value, as the event had it
	Truncated string    `json:"truncated,omitempty"` // what was left out to fit: value, or value,headers
	// ColumnPartition is the partition the row's partition column named
	// (outbox_cdc.partition, as its text): a replay sends it there, or
	// fails it; empty: the key's partition.
	ColumnPartition string `json:"column_partition,omitempty"`
	Conflict        string `json:"conflict,omitempty"`

	key, value []byte // as read; value only while replaying
	headers    []producer.Header
}

// StrippedHeaders are the headers a dead letter carries to describe its
// failure, which a replay leaves out (outbox_cdc.column.* stands for every
// header with that prefix). Every other header, the key, the value and the
// timestamp are published as the dead letter holds them.
var StrippedHeaders = []string{sink.HeaderReason, sink.HeaderError, sink.HeaderTable, sink.HeaderLSN, sink.HeaderTopic,
	sink.HeaderColumn + "*", sink.HeaderNull, sink.HeaderTruncated, sink.HeaderValueBytes, sink.HeaderContractError,
	sink.HeaderPartition, sink.HeaderNullKey}

// describesFailure reports whether a header is one of StrippedHeaders.
func describesFailure(key string) bool {
	switch key {
	case sink.HeaderReason, sink.HeaderError, sink.HeaderTable, sink.HeaderLSN, sink.HeaderTopic,
		sink.HeaderNull, sink.HeaderTruncated, sink.HeaderValueBytes, sink.HeaderContractError, sink.HeaderPartition, sink.HeaderNullKey:
		return true
	}
	return strings.HasPrefix(key, sink.HeaderColumn)
}

// entryOf is the dead letter m, a message of the dead-letter topic, as its
// headers describe it; keepValue keeps its value (for a replay).
func entryOf(m producer.Message, keepValue bool) Entry {
	e := Entry{Partition: m.Partition, Offset: m.Offset, Time: m.Time, Key: string(m.Key), NullKey: m.Key == nil, Size: len(m.Value),
		key: m.Key, headers: m.Headers}
	if keepValue {
		e.value = m.Value
	}
	seen := map[string]string{}
	for _, h := range e.headers {
		v := string(h.Value)
		if first, ok := seen[h.Key]; ok {
			// The relay writes its own headers before the row's: the first
			// is the relay's. withoutValue may repeat value_bytes.
			if first != v && e.Conflict == "" && h.Key != sink.HeaderValueBytes && strings.HasPrefix(h.Key, "outbox_cdc.") {
				e.Conflict = h.Key
			}
			continue
		}
		seen[h.Key] = v
		switch h.Key {
		case sink.HeaderReason:
			e.Reason = v
		case sink.HeaderError:
			e.Error = v
		case sink.HeaderTopic:
			e.Topic = v
		case sink.HeaderTable:
			e.Table = v
		case sink.HeaderLSN:
			e.LSN = v
		case sink.HeaderTruncated:
			e.Truncated = v
		case sink.HeaderPartition:
			e.ColumnPartition = v
		case sink.HeaderNullKey:
			if v == "true" { // the event had a null key: the dead letter is keyed by its id
				e.NullKey, e.Key, e.key = true, "", nil
			}
		case sink.HeaderValueBytes:
			if n, err := strconv.Atoi(v); err == nil {
				e.Size = n
			}
		case "id":
			e.ID = v
		}
	}
	return e
}

// unreplayable says why e cannot be replayed (to toTopic, or else to its
// own topic), or "" when it can.
func (e Entry) unreplayable(toTopic string) string {
	switch {
	case e.Reason == "":
		return "not a dead letter outbox-cdc wrote (no " + sink.HeaderReason + " header)"
	case strings.Contains(e.Truncated, "value"):
		return fmt.Sprintf("its value (%d bytes) was left out to fit the dead-letter topic; publish the row again from the outbox table", e.Size)
	case e.Conflict != "":
		return fmt.Sprintf("its headers hold two values of %s, the relay's and one its row wrote to steer the replay (before outbox-cdc kept rows from outbox_cdc.* headers); check the row and publish it again from the outbox table", e.Conflict)
	case e.Topic == "" && toTopic == "":
		return "the topic it was meant for is not recorded (a row that did not decode into an event has none); give --to-topic"
	case (e.Reason == sink.ReasonPartitionOutOfRange || e.Reason == sink.ReasonInvalidPartition) && e.ColumnPartition == "":
		// Written before HeaderPartition was: its key's partition is not
		// the one its row named.
		return "the partition its row named is not recorded (no " + sink.HeaderPartition + " header); publish the row again from the outbox table"
	}
	return ""
}

// partitionIn says where in topic, of n partitions, the row's partition
// column puts e: named is false when it named none (its key places it);
// why says why it cannot be replayed as it named. A replay never moves
// such a record to another partition: its consumers may count on where the
// row put it.
func (e Entry) partitionIn(topic string, n int) (p int32, named bool, why string) {
	p, named, err := e.namedPartition()
	switch {
	case err != nil:
		return 0, true, err.Error()
	case named && (p < 0 || int(p) >= n):
		return p, true, fmt.Sprintf("its row named partition %d (--column-partition); %s has %d (0 to %d), and a replay does not move it to another", p, topic, n, n-1)
	}
	return p, named, ""
}

// namedPartition is the partition the row's partition column named, read
// as sink reads the column; named is false when it named none.
func (e Entry) namedPartition() (p int32, named bool, err error) {
	if e.ColumnPartition == "" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(e.ColumnPartition, 10, 32)
	if err != nil {
		return 0, true, fmt.Errorf("its row named partition %q (--column-partition), not a partition number", e.ColumnPartition)
	}
	return int32(v), true, nil
}

// message is e as published again to topic: its key, value, timestamp and
// headers but those describing the failure, bound for the partition its
// row named, if any (see partitionIn), else for its key's.
func (e Entry) message(topic string) producer.Message {
	m := producer.Message{Topic: topic, Partition: producer.ByKey, Key: e.key, Value: e.value, Time: e.Time}
	if p, named, err := e.namedPartition(); named && err == nil {
		m.Partition = p // checked against the topic's count (replay.plan); if it is not there, Kafka refuses it
	}
	for _, h := range e.headers {
		if !describesFailure(h.Key) {
			m.Headers = append(m.Headers, h)
		}
	}
	return m
}

// bytes is roughly what e takes in a produce request.
func (e Entry) bytes() int {
	n := len(e.key) + len(e.value)
	for _, h := range e.headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
