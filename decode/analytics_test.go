package decode

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// partRelation is the outbox table with a text payload (so that an empty
// payload can be written) and an integer partition column.
var partRelation = relationMsg(16401, "public", "outbox",
	col{"id", 2950}, col{"aggregate_type", 25}, col{"aggregate_id", 25}, col{"event_type", 25},
	col{"payload", oidText}, col{"headers", oidJSONB}, col{"part", 23})

func TestNullPayloads(t *testing.T) {
	tests := []struct {
		name      string
		policy    NullPayload
		nullKey   bool
		key       *string
		payload   *string
		tombstone bool
		payloadIs *string // the event's payload; nil: want nil
		reason    string  // non-empty: the row is invalid
		detail    string
	}{
		{name: "default dead-letters", key: s("o-1"), reason: ReasonNullColumn, detail: `column "payload" is NULL`},
		{name: "dead-letter", policy: NullPayloadDeadLetter, key: s("o-1"), reason: ReasonNullColumn},
		{name: "tombstone", policy: NullPayloadTombstone, key: s("o-1"), tombstone: true},
		{name: "tombstone, payload present", policy: NullPayloadTombstone, key: s("o-1"), payload: s(`{"a":1}`), payloadIs: s(`{"a":1}`)},
		{name: "tombstone, empty payload is not null", policy: NullPayloadTombstone, key: s("o-1"), payload: s(""), payloadIs: s("")},
		{name: "tombstone without key, null key allowed", policy: NullPayloadTombstone, nullKey: true, key: nil,
			reason: ReasonNullColumn, detail: "no key to make it a tombstone of"},
		{name: "tombstone with empty key, null key allowed", policy: NullPayloadTombstone, nullKey: true, key: s(""),
			reason: ReasonNullColumn, detail: "no key to make it a tombstone of"},
		{name: "tombstone with empty key, null key refused", policy: NullPayloadTombstone, key: s(""),
			reason: ReasonNullColumn, detail: "no key to make it a tombstone of"},
		{name: "tombstone with null key, null key refused", policy: NullPayloadTombstone, key: nil,
			reason: ReasonNullColumn, detail: `column "aggregate_id" is NULL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := defaultCols
			cols.NullPayload, cols.NullKey = tt.policy, tt.nullKey
			d := New(Table{Schema: "public", Name: "outbox", Columns: cols})
			decodeAll(t, d, beginMsg(0x1000, time.Now(), 7), partRelation)
			res, err := d.Decode(insertMsg(16401, s("a"), s("order"), tt.key, s("deleted"), tt.payload, s(`{"trace":"t-1"}`), nil))
			if tt.reason != "" {
				var rowErr *InvalidRowError
				if !errors.As(err, &rowErr) || rowErr.Reason != tt.reason || !strings.Contains(rowErr.Detail, tt.detail) {
					t.Fatalf("got %v, want an invalid row (%s) saying %q", err, tt.reason, tt.detail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ev := res.Event
			if ev.Tombstone != tt.tombstone || ev.AggregateID != "o-1" {
				t.Errorf("tombstone %v key %q, want %v and o-1", ev.Tombstone, ev.AggregateID, tt.tombstone)
			}
			switch {
			case tt.payloadIs == nil && ev.Payload != nil:
				t.Errorf("payload %q, want nil (a null value)", ev.Payload)
			case tt.payloadIs != nil && (ev.Payload == nil || string(ev.Payload) != *tt.payloadIs):
				t.Errorf("payload %q (nil %v), want %q and not nil", ev.Payload, ev.Payload == nil, *tt.payloadIs)
			}
			if len(ev.Headers) != 1 || ev.Headers[0].Key != "trace" || ev.EventType != "deleted" || ev.ID != "a" {
				t.Errorf("event %+v: a tombstone keeps its id, type and headers", ev)
			}
		})
	}
}

// TestTombstoneFromBackfill: a row the backfill reads decodes as a row
// streamed does.
func TestTombstoneFromBackfill(t *testing.T) {
	cols := defaultCols
	cols.NullPayload = NullPayloadTombstone
	d := New(Table{Schema: "public", Name: "outbox", Columns: cols})
	var m pglogrepl.RelationMessage
	if err := decodeGuarded(&m, partRelation[1:]); err != nil {
		t.Fatal(err)
	}
	ev, err := d.Rows(&m).Event([][]byte{[]byte("a"), []byte("order"), []byte("o-1"), []byte("deleted"), nil, nil, []byte("3")}, 0x10, time.Now())
	if err != nil || !ev.Tombstone || ev.Payload != nil {
		t.Fatalf("backfilled row: %+v, %v; want a tombstone", ev, err)
	}
}

func TestPartitionColumn(t *testing.T) {
	tests := []struct {
		name   string
		part   *string
		want   string
		reason string
	}{
		{name: "a partition", part: s("2"), want: "2"},
		{name: "NULL: by key", part: nil, want: ""},
		{name: "out of range is sink's to say", part: s("-1"), want: "-1"},
		{name: "unchanged TOAST", part: s("\x00toast"), reason: ReasonUnreadableColumn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := defaultCols
			cols.Partition = "part"
			d := New(Table{Schema: "public", Name: "outbox", Columns: cols})
			decodeAll(t, d, partRelation)
			res, err := d.Decode(insertMsg(16401, s("a"), s("order"), s("o-1"), s("e"), s("{}"), nil, tt.part))
			var rowErr *InvalidRowError
			switch {
			case tt.reason != "" && (!errors.As(err, &rowErr) || rowErr.Reason != tt.reason):
				t.Errorf("got %v, want an invalid row (%s)", err, tt.reason)
			case tt.reason == "" && err != nil:
				t.Error(err)
			case tt.reason == "" && res.Event.Partition != tt.want:
				t.Errorf("partition %q, want %q", res.Event.Partition, tt.want)
			}
		})
	}
	// Without the setting the column is an ordinary one; named and
	// missing, the table is unmapped, naming the flag.
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	if res := decodeAll(t, d, partRelation, insertMsg(16401, s("a"), s("order"), s("o-1"), s("e"), s("{}"), nil, s("2"))); res[1].Event.Partition != "" {
		t.Errorf("partition %q without --column-partition, want none", res[1].Event.Partition)
	}
	cols := defaultCols
	cols.Partition = "shard"
	d = New(Table{Schema: "public", Name: "outbox", Columns: cols})
	decodeAll(t, d, partRelation)
	_, err := d.Decode(insertMsg(16401, s("a"), s("order"), s("o-1"), s("e"), s("{}"), nil, s("2")))
	var rowErr *InvalidRowError
	if !errors.As(err, &rowErr) || rowErr.Reason != ReasonUnmappedTable || !strings.Contains(err.Error(), "--column-partition") {
		t.Errorf("missing partition column: %v, want unmapped_table naming --column-partition", err)
	}
}
