package decode

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// Builders of pgoutput messages (protocol version 1), byte by byte.

type col struct {
	name string
	oid  uint32
}

func relationMsg(id uint32, schema, table string, cols ...col) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(append(b, schema...), 0)
	b = append(append(b, table...), 0)
	b = append(b, 'd') // replica identity default
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for i, c := range cols {
		flags := byte(0)
		if i == 0 {
			flags = 1 // part of the key
		}
		b = append(b, flags)
		b = append(append(b, c.name...), 0)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff) // typmod -1
	}
	return b
}

func pgTime(t time.Time) uint64 {
	return uint64(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds())
}

func beginMsg(final pglogrepl.LSN, at time.Time, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, uint64(final))
	b = binary.BigEndian.AppendUint64(b, pgTime(at))
	return binary.BigEndian.AppendUint32(b, xid)
}

func commitMsg(commit, end pglogrepl.LSN, at time.Time) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, uint64(commit))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	return binary.BigEndian.AppendUint64(b, pgTime(at))
}

// value is one tuple column: nil is NULL, "\x00toast" is an unchanged TOAST value.
func tupleData(values ...*string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(values)))
	for _, v := range values {
		switch {
		case v == nil:
			b = append(b, 'n')
		case *v == "\x00toast":
			b = append(b, 'u')
		default:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(*v)))
			b = append(b, *v...)
		}
	}
	return b
}

func insertMsg(rel uint32, values ...*string) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, rel)
	b = append(b, 'N')
	return append(b, tupleData(values...)...)
}

func s(v string) *string { return &v }

var defaultCols = Columns{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", EventType: "event_type",
	Payload: "payload", Headers: "headers", Timestamp: "created_at"}

var outboxRelation = relationMsg(16400, "public", "outbox",
	col{"id", 2950}, col{"aggregate_type", 25}, col{"aggregate_id", 25}, col{"event_type", 25},
	col{"payload", oidJSONB}, col{"headers", oidJSONB}, col{"created_at", 1184})

func decodeAll(t *testing.T, d *Decoder, msgs ...[]byte) []Result {
	t.Helper()
	var out []Result
	for i, m := range msgs {
		r, err := d.Decode(m)
		if err != nil {
			t.Fatalf("message %d (%q): %v", i, m[0], err)
		}
		out = append(out, r)
	}
	return out
}

func TestDecodeTransaction(t *testing.T) {
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	commit := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC)
	payload := `{"total": 42, "note": "h\u00e9llo"}`
	res := decodeAll(t, d,
		beginMsg(0x1000, commit, 77),
		outboxRelation,
		insertMsg(16400, s("0b7c5b9e-0000-4000-8000-000000000001"), s("order"), s("o-1"), s("created"),
			s(payload), s(`{"trace": "abc", "retry": 3, "gone": null, "id": "spoof"}`), s("2026-11-22 09:59:59.5+00")),
		insertMsg(16400, s("0b7c5b9e-0000-4000-8000-000000000002"), s("order"), s("o-1"), s("paid"),
			s(`{}`), nil, nil),
		commitMsg(0x1000, 0x1028, commit),
	)
	kinds := []Kind{KindBegin, KindSkip, KindEvent, KindEvent, KindCommit}
	for i, k := range kinds {
		if res[i].Kind != k {
			t.Fatalf("message %d decoded to kind %d, want %d", i, res[i].Kind, k)
		}
	}
	ev := res[2].Event
	if ev.ID != "0b7c5b9e-0000-4000-8000-000000000001" || ev.AggregateType != "order" || ev.AggregateID != "o-1" || ev.EventType != "created" {
		t.Errorf("event fields: %+v", ev)
	}
	if string(ev.Payload) != payload {
		t.Errorf("payload %q, want %q byte for byte", ev.Payload, payload)
	}
	if ev.CommitLSN != 0x1000 || ev.Xid != 77 {
		t.Errorf("commit LSN %s xid %d, want 0/1000 and 77", ev.CommitLSN, ev.Xid)
	}
	if want := time.Date(2026, 11, 22, 9, 59, 59, 500000000, time.UTC); !ev.Time.Equal(want) {
		t.Errorf("time %s, want the created_at column %s", ev.Time, want)
	}
	// Headers: strings as they are, other JSON as its text, null and
	// reserved names left out, sorted by key.
	var got []string
	for _, h := range ev.Headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	if strings.Join(got, ",") != "retry=3,trace=abc" {
		t.Errorf("headers %v, want [retry=3 trace=abc]", got)
	}
	second := res[3].Event
	if !second.Time.Equal(commit) || len(second.Headers) != 0 {
		t.Errorf("row without headers and timestamp: time %s headers %v, want commit time and none", second.Time, second.Headers)
	}
	if res[4].End != 0x1028 {
		t.Errorf("commit end %s, want 0/1028", res[4].End)
	}
}

func TestDecodeSkipsWhatIsNotAnOutboxInsert(t *testing.T) {
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	other := relationMsg(16500, "public", "orders", col{"id", 23})
	update := append([]byte{'U'}, binary.BigEndian.AppendUint32(nil, 16400)...)
	update = append(append(update, 'N'), tupleData(s("1"))...)
	del := append([]byte{'D'}, binary.BigEndian.AppendUint32(nil, 16400)...)
	del = append(append(del, 'K'), tupleData(s("1"))...)
	truncate := []byte{'T', 0, 0, 0, 1, 0, 0, 0, 0x40, 0x10}
	typ := append([]byte{'Y', 0, 0, 0x40, 0}, "public\x00mood\x00"...)
	origin := append([]byte{'O', 0, 0, 0, 0, 0, 0, 0x10, 0}, "node1\x00"...)
	message := append([]byte{'M', 1, 0, 0, 0, 0, 0, 0, 0x10, 0}, "prefix\x00\x00\x00\x00\x02hi"...)
	res := decodeAll(t, d, outboxRelation, other, insertMsg(16500, s("7")), update, del, truncate, typ, origin, message)
	for i, r := range res {
		if r.Kind != KindSkip {
			t.Errorf("message %d (%q): kind %d, want skip", i, []byte{}, r.Kind)
		}
	}
}

func TestDecodeHeartbeat(t *testing.T) {
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	msg := func(transactional byte, prefix string) []byte {
		m := append([]byte{'M', transactional, 0, 0, 0, 0, 0, 0, 0x20, 0}, prefix...)
		return append(m, 0, 0, 0, 0, 0)
	}
	res := decodeAll(t, d, msg(0, HeartbeatPrefix), msg(1, HeartbeatPrefix), msg(0, "someone-else"))
	if res[0].Kind != KindHeartbeat || res[0].End != 0x2000 {
		t.Errorf("non-transactional heartbeat: %+v, want KindHeartbeat at 0/2000", res[0])
	}
	for i, r := range res[1:] {
		if r.Kind != KindSkip {
			t.Errorf("message %d: kind %d, want skip (transactional, or another prefix)", i+1, r.Kind)
		}
	}
}

func TestDecodeByteaPayloadAndRenamedColumns(t *testing.T) {
	cols := Columns{ID: "id", AggregateType: "aggregatetype", AggregateID: "aggregateid", EventType: "type", Payload: "payload"}
	d := New(Table{Schema: "app", Name: "events", Columns: cols})
	rel := relationMsg(1, "app", "events", col{"id", 2950}, col{"aggregatetype", 1043}, col{"aggregateid", 1043},
		col{"type", 1043}, col{"payload", oidBytea})
	res := decodeAll(t, d, rel, insertMsg(1, s("x"), s("Order"), s("o-9"), s("OrderCreated"), s(`\x00ff10`)))
	if got := res[1].Event.Payload; string(got) != "\x00\xff\x10" {
		t.Errorf("bytea payload %x, want 00ff10", got)
	}
}

func TestInvalidRows(t *testing.T) {
	tests := []struct {
		name   string
		rel    []byte
		insert []byte
		code   string
		reason string
	}{
		{"null aggregate id", outboxRelation,
			insertMsg(16400, s("a"), s("order"), nil, s("e"), s("{}"), nil, nil), ReasonNullColumn, `column "aggregate_id" is NULL`},
		{"empty aggregate id", outboxRelation,
			insertMsg(16400, s("a"), s("order"), s(""), s("e"), s("{}"), nil, nil), ReasonEmptyAggregateID, `column "aggregate_id" is empty`},
		{"null payload", outboxRelation,
			insertMsg(16400, s("a"), s("order"), s("o"), s("e"), nil, nil, nil), ReasonNullColumn, `column "payload" is NULL`},
		{"headers not an object", outboxRelation,
			insertMsg(16400, s("a"), s("order"), s("o"), s("e"), s("{}"), s(`["x"]`), nil), ReasonInvalidHeaders, `want a JSON object`},
		{"column missing", relationMsg(16400, "public", "outbox", col{"id", 2950}, col{"payload", oidJSONB}),
			insertMsg(16400, s("a"), s("{}")), ReasonUnmappedTable, `no column "aggregate_type" (--column-aggregate-type)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
			decodeAll(t, d, tt.rel)
			_, err := d.Decode(tt.insert)
			var rowErr *InvalidRowError
			if !errors.As(err, &rowErr) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("error %v, want an InvalidRowError saying %q", err, tt.reason)
			}
			if rowErr.Reason != tt.code {
				t.Errorf("reason %q, want %q", rowErr.Reason, tt.code)
			}
			// The whole row travels with the error, so that it can be
			// dead-lettered: the id column's text is there.
			if v, ok := rowErr.Column("id"); !ok || string(v) != "a" {
				t.Errorf("column id = %q, %v; want \"a\"", v, ok)
			}
		})
	}
}

func TestMalformedMessagesAreErrorsNotPanics(t *testing.T) {
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	decodeAll(t, d, outboxRelation)
	full := insertMsg(16400, s("a"), s("order"), s("o"), s("e"), s("{}"), nil, nil)
	cases := map[string][]byte{
		"empty":            {},
		"unknown type":     {'Z', 1, 2},
		"truncated insert": full[:len(full)-1],
		"unknown relation": insertMsg(99, s("a")),
		"wrong col count":  insertMsg(16400, s("a")),
		"truncated begin":  beginMsg(1, time.Now(), 1)[:5],
		"truncated rel":    outboxRelation[:12],
	}
	for name, m := range cases {
		if _, err := d.Decode(m); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(insertMsg(16400, s("a"), s("order"), s("o"), s("e"), s("{}"), nil, nil))
	f.Add(outboxRelation)
	f.Add(beginMsg(1, time.Now(), 1))
	f.Fuzz(func(t *testing.T, m []byte) {
		d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
		if _, err := d.Decode(outboxRelation); err != nil {
			t.Fatal(err)
		}
		_, _ = d.Decode(m) // must not panic
	})
}

func TestSeveralTablesAndHeaderColumns(t *testing.T) {
	billing := Columns{ID: "id", AggregateType: "aggregatetype", AggregateID: "aggregateid", EventType: "type", Payload: "body",
		HeaderColumns: []HeaderColumn{{Column: "tenant_id", Header: "tenant"}, {Column: "correlation_id"}}}
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols}, Table{Schema: "billing", Name: "outbox", Columns: billing})
	billingRel := relationMsg(2, "billing", "outbox", col{"id", 25}, col{"aggregatetype", 25}, col{"aggregateid", 25},
		col{"type", 25}, col{"body", 25}, col{"tenant_id", 25}, col{"correlation_id", 25})
	otherRel := relationMsg(3, "public", "orders", col{"id", 25})
	res := decodeAll(t, d, outboxRelation, billingRel, otherRel,
		insertMsg(16400, s("a"), s("order"), s("o-1"), s("created"), s(`{"n": 1}`), nil, nil),
		insertMsg(2, s("b"), s("invoice"), s("i-1"), s("issued"), s("plain text"), s("acme"), nil),
		insertMsg(3, s("x")))
	ev1, ev2 := res[3].Event, res[4].Event
	if ev1.Table != "public.outbox" || ev1.ContentType != "application/json" || len(ev1.Headers) != 0 {
		t.Errorf("public.outbox event: table %q, content type %q, headers %v", ev1.Table, ev1.ContentType, ev1.Headers)
	}
	if ev2.Table != "billing.outbox" || ev2.AggregateType != "invoice" || string(ev2.Payload) != "plain text" || ev2.ContentType != "text/plain; charset=utf-8" {
		t.Errorf("billing.outbox event: %+v", ev2)
	}
	// The NULL correlation_id is left out; tenant_id is renamed.
	if len(ev2.Headers) != 1 || ev2.Headers[0].Key != "tenant" || string(ev2.Headers[0].Value) != "acme" {
		t.Errorf("billing.outbox headers %v", ev2.Headers)
	}
	if res[5].Kind != KindSkip {
		t.Errorf("an insert into another table: kind %d, want skip", res[5].Kind)
	}

	// A mapped header column the table lacks makes its rows unmapped.
	missing := billing
	missing.HeaderColumns = []HeaderColumn{{Column: "nope"}}
	d = New(Table{Schema: "billing", Name: "outbox", Columns: missing})
	decodeAll(t, d, billingRel)
	_, err := d.Decode(insertMsg(2, s("b"), s("invoice"), s("i-1"), s("issued"), s("x"), s("acme"), nil))
	var rowErr *InvalidRowError
	if !errors.As(err, &rowErr) || rowErr.Reason != ReasonUnmappedTable || !strings.Contains(rowErr.Detail, `"nope" (--header-column)`) ||
		rowErr.Mapping.Payload != "body" {
		t.Errorf("missing header column: %v", err)
	}
}

// TestDecodeFollowsRenamedTable: a table renamed (or moved to another
// schema) keeps its OID; its inserts are still events, named as configured.
// Without an OID a relation is matched by name, as before.
func TestDecodeFollowsRenamedTable(t *testing.T) {
	cols := []col{{"id", 2950}, {"aggregate_type", 25}, {"aggregate_id", 25}, {"event_type", 25}, {"payload", 3802}, {"headers", 3802}, {"created_at", 1184}}
	values := []*string{s("0b7c5b9e-0000-4000-8000-000000000001"), s("order"), s("o-1"), s("created"), s(`{}`), nil, nil}
	for _, tc := range []struct {
		name string
		oid  uint32
		rel  []byte
		id   uint32
		want Kind
	}{
		{"renamed, followed by OID", 16400, relationMsg(16400, "public", "outbox_old", cols...), 16400, KindEvent},
		{"moved to another schema", 16400, relationMsg(16400, "archive", "outbox", cols...), 16400, KindEvent},
		{"same name, OID unknown", 0, relationMsg(16400, "public", "outbox", cols...), 16400, KindEvent},
		{"renamed, OID unknown", 0, relationMsg(16400, "public", "outbox_old", cols...), 16400, KindSkip},
		{"another table", 16400, relationMsg(16500, "public", "other", cols...), 16500, KindSkip},
	} {
		d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols, OID: tc.oid})
		res := decodeAll(t, d, beginMsg(0x1000, time.Now(), 77), tc.rel, insertMsg(tc.id, values...), commitMsg(0x1000, 0x1028, time.Now()))
		if res[2].Kind != tc.want {
			t.Errorf("%s: kind %d, want %d", tc.name, res[2].Kind, tc.want)
		}
		if tc.want == KindEvent && res[2].Event.Table != "public.outbox" {
			t.Errorf("%s: event names table %q, want the configured public.outbox", tc.name, res[2].Event.Table)
		}
	}
}
