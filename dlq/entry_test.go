package dlq

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// record is a message of the dead-letter topic's partition 3 at offset 42.
func record(key, value []byte, headers ...string) producer.Message {
	m := producer.Message{Topic: "dlq", Partition: 3, Offset: 42, Time: time.Unix(1700000000, 0), Key: key, Value: value}
	for i := 0; i < len(headers); i += 2 {
		m.Headers = append(m.Headers, producer.Header{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return m
}

// headerKeys is the keys of m's headers, comma-separated.
func headerKeys(m producer.Message) string {
	var ks []string
	for _, h := range m.Headers {
		ks = append(ks, h.Key)
	}
	return strings.Join(ks, ",")
}

// TestEntryHeaders: a dead letter's headers describe it, and only those
// describing the failure are left out of its replay, whatever their order.
func TestEntryHeaders(t *testing.T) {
	r := record([]byte("o-1"), []byte(`{"n":1}`),
		"outbox_cdc.reason", "message_too_large", "outbox_cdc.error", "too big", "outbox_cdc.table", "public.outbox",
		"outbox_cdc.lsn", "0/16B3748", "outbox_cdc.topic", "orders", "id", "e-1", "event_type", "created",
		"outbox_cdc.column.extra", "x", "outbox_cdc.null", "a,b", "ce_id", "e-1", "outbox_cdc.commit_lsn", "0/16B3748",
		"traceparent", "00-abc", "outbox_cdc.truncated", "headers", "outbox_cdc.value_bytes", "7", "outbox_cdc.xid", "9",
		"outbox_cdc.partition", "2")
	e := entryOf(r, true)
	want := Entry{Partition: 3, Offset: 42, Time: r.Time, Reason: "message_too_large", Error: "too big", Topic: "orders",
		Table: "public.outbox", LSN: "0/16B3748", ID: "e-1", Key: "o-1", Size: 7, Truncated: "headers", ColumnPartition: "2"}
	got := e
	got.key, got.value, got.headers = nil, nil, nil
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("entry\n%+v, want\n%+v", got, want)
	}
	m := e.message("fixed")
	var kept []string
	for _, h := range m.Headers {
		kept = append(kept, h.Key+"="+string(h.Value))
	}
	// The relay's own metadata headers (outbox_cdc.commit_lsn, xid) were on
	// the event: they stay.
	if got, want := strings.Join(kept, " "), "id=e-1 event_type=created ce_id=e-1 outbox_cdc.commit_lsn=0/16B3748 traceparent=00-abc outbox_cdc.xid=9"; got != want {
		t.Errorf("replayed headers\n%s, want\n%s", got, want)
	}
	if m.Topic != "fixed" || string(m.Key) != "o-1" || string(m.Value) != `{"n":1}` || !m.Time.Equal(r.Time) || m.Partition != 2 {
		t.Errorf("replayed message %+v", m)
	}
	for _, h := range StrippedHeaders {
		if !describesFailure(strings.TrimSuffix(h, "*")+"x") && !describesFailure(h) {
			t.Errorf("StrippedHeaders names %s, which a replay keeps", h)
		}
	}
}

func TestEntryNullKeyAndValue(t *testing.T) {
	e := entryOf(record(nil, nil, "outbox_cdc.reason", "null_column"), false)
	if !e.NullKey || e.key != nil || e.Size != 0 {
		t.Errorf("null key and value: %+v", e)
	}
	// An event with a null key, dead-lettered keyed by its id.
	e = entryOf(record([]byte("e-9"), []byte("v"), "outbox_cdc.reason", "topic_missing", "outbox_cdc.null_key", "true", "id", "e-9"), true)
	if m := e.message("t"); !e.NullKey || e.Key != "" || m.Key != nil || headerKeys(m) != "id" || m.Partition != producer.ByKey {
		t.Errorf("null key kept by outbox_cdc.null_key: %+v, replayed key %q, headers %s", e, m.Key, headerKeys(m))
	}
	e = entryOf(record([]byte{}, []byte("v")), false)
	if e.NullKey || e.key == nil || e.value != nil || e.Size != 1 || e.message("t").Partition != producer.ByKey {
		t.Errorf("empty key, value not kept: %+v", e)
	}
}

func TestUnreplayable(t *testing.T) {
	for _, tt := range []struct {
		e       Entry
		toTopic string
		want    string
	}{
		{Entry{Reason: "message_too_large", Topic: "orders"}, "", ""},
		{Entry{Reason: "message_too_large", Topic: "orders", Truncated: "value", Size: 5000}, "", "value (5000 bytes) was left out"},
		{Entry{Reason: "message_too_large", Topic: "orders", Truncated: "value,headers"}, "x", "was left out"},
		{Entry{Reason: "null_column"}, "", "give --to-topic"},
		{Entry{Reason: "null_column"}, "fixed", ""},
		{Entry{Topic: "orders"}, "", "not a dead letter"},
		{Entry{Reason: "partition_out_of_range", Topic: "orders"}, "", "the partition its row named is not recorded"},
		{Entry{Reason: "invalid_partition", Topic: "orders"}, "x", "the partition its row named is not recorded"},
		{Entry{Reason: "partition_out_of_range", Topic: "orders", ColumnPartition: "3"}, "", ""},
	} {
		got := tt.e.unreplayable(tt.toTopic)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%+v to %q: %q, want %q", tt.e, tt.toTopic, got, tt.want)
		}
	}
}

// TestEntryTakesTheRelaysHeaders: the relay writes its own headers before
// the row's, so the first of each is the relay's; a row that repeated one
// with another value (as versions before rows were kept from outbox_cdc.*
// headers let it) makes the dead letter unreplayable, saying which.
func TestEntryTakesTheRelaysHeaders(t *testing.T) {
	for _, tt := range []struct {
		headers  []string
		topic    string
		size     int
		conflict string
	}{
		{[]string{"outbox_cdc.topic", "orders", "outbox_cdc.topic", "payments.commands"}, "orders", 2, "outbox_cdc.topic"},
		{[]string{"outbox_cdc.topic", "orders", "outbox_cdc.topic", "orders"}, "orders", 2, ""},
		{[]string{"outbox_cdc.topic", "orders", "outbox_cdc.table", "a", "outbox_cdc.table", "b"}, "orders", 2, "outbox_cdc.table"},
		{[]string{"outbox_cdc.topic", "orders", "outbox_cdc.null_key", "true", "outbox_cdc.null_key", "false"}, "orders", 2, "outbox_cdc.null_key"},
		// A dead letter sent again without its value gains a second
		// value_bytes (0): the first is the value's size.
		{[]string{"outbox_cdc.topic", "orders", "outbox_cdc.value_bytes", "9000", "outbox_cdc.value_bytes", "0"}, "orders", 9000, ""},
		{[]string{"id", "e-1", "id", "e-2", "outbox_cdc.topic", "orders"}, "orders", 2, ""},
	} {
		e := entryOf(record([]byte("k"), []byte("{}"), append([]string{"outbox_cdc.reason", "message_too_large"}, tt.headers...)...), false)
		why := e.unreplayable("")
		if e.Topic != tt.topic || e.Size != tt.size || e.Conflict != tt.conflict || (why != "") != (tt.conflict != "") ||
			tt.conflict != "" && !strings.Contains(why, "two values of "+tt.conflict) {
			t.Errorf("%q: topic %q, size %d, conflict %q, unreplayable %q; want %q, %d, %q", tt.headers, e.Topic, e.Size, e.Conflict, why, tt.topic, tt.size, tt.conflict)
		}
	}
}
