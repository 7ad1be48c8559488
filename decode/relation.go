package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// Type OIDs that change how a column's text form is read.
const (
	oidBytea = 17
	oidJSON  = 114
	oidJSONB = 3802
)

// relation is a table described by a Relation message, with the outbox
// columns' positions resolved once so that each Insert is read in O(columns).
type relation struct {
	name    string // schema.table
	columns []pglogrepl.RelationMessageColumn
	outbox  bool
	cols    Columns // the outbox table's mapping
	err     error   // why this outbox relation cannot be mapped, reported on each Insert

	id, aggType, aggID, evType, payload int
	headers, ts                         int   // -1 when the table has no such column (aggType, aggID too)
	extra                               []int // HeaderColumns' positions
	fields                              []int // TopicColumns' positions
	contentType                         string
}

func (d *Decoder) newRelation(m *pglogrepl.RelationMessage) *relation {
	r := &relation{name: m.Namespace + "." + m.RelationName}
	for _, c := range m.Columns {
		r.columns = append(r.columns, *c)
	}
	// By OID first: WAL decoded after a rename names the table anew, and
	// WAL replayed from before it names it as it was.
	i := slices.IndexFunc(d.tables, func(t Table) bool { return t.OID != 0 && t.OID == m.RelationID })
	if i < 0 {
		i = slices.IndexFunc(d.tables, func(t Table) bool { return t.Schema == m.Namespace && t.Name == m.RelationName })
	}
	if i < 0 {
		return r
	}
	// Events name the table as configured, which routing and cleanup know.
	r.outbox, r.cols, r.name = true, d.tables[i].Columns, d.tables[i].Qualified()
	index := func(name string) int {
		return slices.IndexFunc(r.columns, func(c pglogrepl.RelationMessageColumn) bool { return c.Name == name })
	}
	required := []struct {
		dst  *int
		name string
		flag string
	}{
		{&r.id, r.cols.ID, "--column-id"},
		{&r.aggType, r.cols.AggregateType, "--column-aggregate-type"},
		{&r.aggID, r.cols.AggregateID, "--column-aggregate-id"},
		{&r.evType, r.cols.EventType, "--column-event-type"},
		{&r.payload, r.cols.Payload, "--column-payload"},
	}
	for _, c := range required {
		if *c.dst = index(c.name); *c.dst < 0 && c.name != "" && r.err == nil {
			r.err = fmt.Errorf("outbox table %s has no column %q (%s)", r.name, c.name, c.flag)
		}
	}
	for _, name := range r.cols.TopicColumns {
		j := index(name)
		if j < 0 && r.err == nil {
			r.err = fmt.Errorf("outbox table %s has no column %q (named in the topic template)", r.name, name)
		}
		r.fields = append(r.fields, j)
	}
	for _, h := range r.cols.HeaderColumns {
		j := index(h.Column)
		if j < 0 && r.err == nil {
			r.err = fmt.Errorf("outbox table %s has no column %q (--header-column)", r.name, h.Column)
		}
		r.extra = append(r.extra, j)
	}
	r.headers, r.ts = index(r.cols.Headers), index(r.cols.Timestamp)
	if r.err == nil {
		r.contentType = contentType(r.columns[r.payload].DataType)
	}
	return r
}

// Type OIDs of text payloads.
const (
	oidText    = 25
	oidVarchar = 1043
)

func contentType(oid uint32) string {
	switch oid {
	case oidJSON, oidJSONB:
		return "application/json"
	case oidText, oidVarchar:
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// tuple is the columns of one TupleData, each a slice of the message buffer.
type tuple struct {
	kind []byte   // 'n' null, 'u' unchanged toast, 't' text, 'b' binary
	data [][]byte // the value, for 't' and 'b'
}

func (t *tuple) read(src []byte, want int) error {
	if len(src) < 2 {
		return fmt.Errorf("tuple: %d bytes, want at least 2", len(src))
	}
	n := int(binary.BigEndian.Uint16(src))
	if n != want {
		return fmt.Errorf("tuple has %d columns, the relation %d", n, want)
	}
	src = src[2:]
	t.kind, t.data = make([]byte, n), make([][]byte, n)
	for i := range n {
		if len(src) < 1 {
			return fmt.Errorf("tuple column %d: truncated", i)
		}
		t.kind[i], src = src[0], src[1:]
		switch t.kind[i] {
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(src) < 4 {
				return fmt.Errorf("tuple column %d: truncated length", i)
			}
			l := int(binary.BigEndian.Uint32(src))
			if l < 0 || len(src)-4 < l {
				return fmt.Errorf("tuple column %d: length %d exceeds the message", i, l)
			}
			t.data[i], src = src[4:4+l], src[4+l:]
		default:
			return fmt.Errorf("tuple column %d: unknown kind %q", i, t.kind[i])
		}
	}
	return nil
}

// event maps a tuple of this outbox relation to an Event that owns its bytes.
func (r *relation) event(t *tuple) (Event, error) {
	var ev Event
	if r.err != nil {
		return Event{}, r.invalid(t, "", ReasonUnmappedTable, r.err.Error())
	}
	var reason, detail string
	text := func(i int, dst *string) {
		if reason == "" {
			var b []byte
			if b, reason, detail = r.value(t, i); reason == "" {
				*dst = string(b)
			}
		}
	}
	text(r.id, &ev.ID)
	if r.aggType >= 0 {
		text(r.aggType, &ev.AggregateType)
	}
	if r.aggID >= 0 && !(r.cols.NullKey && t.kind[r.aggID] == pglogrepl.TupleDataTypeNull) {
		text(r.aggID, &ev.AggregateID)
	}
	text(r.evType, &ev.EventType)
	var payload []byte
	if reason == "" {
		payload, reason, detail = r.value(t, r.payload)
	}
	if reason == "" && r.aggID >= 0 && ev.AggregateID == "" && !r.cols.NullKey {
		reason, detail = ReasonEmptyAggregateID, fmt.Sprintf("column %q is empty; it is the Kafka message key (--null-key=allow gives such rows a null key)", r.columns[r.aggID].Name)
	}
	for k, j := range r.fields {
		if reason != "" {
			break
		}
		if ev.Fields == nil {
			ev.Fields = make(map[string]string, len(r.fields))
		}
		switch t.kind[j] {
		case pglogrepl.TupleDataTypeNull:
			ev.Fields[r.cols.TopicColumns[k]] = ""
		default:
			var b []byte
			if b, reason, detail = r.value(t, j); reason == "" {
				ev.Fields[r.cols.TopicColumns[k]] = string(b)
			}
		}
	}
	if reason != "" {
		return Event{}, r.invalid(t, ev.ID, reason, detail)
	}
	if r.columns[r.payload].DataType == oidBytea {
		var err error
		if ev.Payload, err = unhexBytea(payload); err != nil {
			return Event{}, r.invalid(t, ev.ID, ReasonInvalidBytea, err.Error())
		}
	} else {
		ev.Payload = bytes.Clone(payload)
	}
	if r.headers >= 0 && t.kind[r.headers] != pglogrepl.TupleDataTypeNull {
		var err error
		if ev.Headers, err = parseHeaders(t.data[r.headers]); err != nil {
			return Event{}, r.invalid(t, ev.ID, ReasonInvalidHeaders, fmt.Sprintf("column %q: %v", r.columns[r.headers].Name, err))
		}
	}
	for k, j := range r.extra {
		switch t.kind[j] {
		case pglogrepl.TupleDataTypeText:
			ev.Headers = append(ev.Headers, Header{Key: r.cols.HeaderColumns[k].Name(), Value: bytes.Clone(t.data[j])})
		case pglogrepl.TupleDataTypeNull:
		default:
			_, reason, detail := r.value(t, j)
			return Event{}, r.invalid(t, ev.ID, reason, detail)
		}
	}
	ev.ContentType = r.contentType
	if r.ts >= 0 && t.kind[r.ts] == pglogrepl.TupleDataTypeText {
		ev.Time, _ = parseTimestamp(string(t.data[r.ts])) // unreadable or infinite: commit time
	}
	return ev, nil
}

// invalid returns the error for a row that cannot become an event, with a
// copy of every column so that it can be dead-lettered whole.
func (r *relation) invalid(t *tuple, id, reason, detail string) *InvalidRowError {
	e := &InvalidRowError{Table: r.name, ID: id, Reason: reason, Detail: detail, Columns: make([]Column, len(r.columns))}
	for i, c := range r.columns {
		e.Columns[i] = Column{Name: c.Name, Null: t.kind[i] != pglogrepl.TupleDataTypeText && t.kind[i] != pglogrepl.TupleDataTypeBinary}
		if !e.Columns[i].Null {
			e.Columns[i].Value = bytes.Clone(t.data[i])
		}
	}
	return e
}

// value returns the text of column i, which must be present and not NULL,
// or why it is not.
func (r *relation) value(t *tuple, i int) (b []byte, reason, detail string) {
	name := r.columns[i].Name
	switch t.kind[i] {
	case pglogrepl.TupleDataTypeText:
		return t.data[i], "", ""
	case pglogrepl.TupleDataTypeNull:
		return nil, ReasonNullColumn, fmt.Sprintf("column %q is NULL", name)
	case pglogrepl.TupleDataTypeToast:
		return nil, ReasonUnreadableColumn, fmt.Sprintf("column %q is an unchanged TOAST value, not sent", name)
	default:
		return nil, ReasonUnreadableColumn, fmt.Sprintf("column %q arrived in binary format; outbox-cdc reads text", name)
	}
}

// unhexBytea decodes bytea's text output in hex format (\x0a0b...).
func unhexBytea(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(`\x`)) {
		return nil, fmt.Errorf("bytea payload not in hex format (set bytea_output = 'hex')")
	}
	out := make([]byte, hex.DecodedLen(len(b)-2))
	if _, err := hex.Decode(out, b[2:]); err != nil {
		return nil, fmt.Errorf("bytea payload: %w", err)
	}
	return out, nil
}

// reservedHeaders are set from the outbox columns; a member of the headers
// column with one of these names is left out so that consumers see one value.
var reservedHeaders = map[string]bool{"id": true, "event_type": true, "aggregate_type": true}

// parseHeaders turns a JSON object into headers: a string member gives its
// value, null is left out, and any other value gives its JSON text.
func parseHeaders(b []byte) ([]Header, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !reservedHeaders[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	hs := make([]Header, 0, len(keys))
	for _, k := range keys {
		raw := m[k]
		switch {
		case string(raw) == "null":
			continue
		case strings.HasPrefix(string(raw), `"`):
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("member %q: %w", k, err)
			}
			hs = append(hs, Header{Key: k, Value: []byte(s)})
		default:
			hs = append(hs, Header{Key: k, Value: bytes.Clone(raw)})
		}
	}
	return hs, nil
}

// timestampLayouts are the text forms of timestamptz and timestamp with
// DateStyle ISO; the replication connection sets it, and TimeZone UTC.
var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07:00:00",
	"2006-01-02 15:04:05.999999999",
}

func parseTimestamp(s string) (time.Time, error) {
	for _, layout := range timestampLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("unreadable timestamp %q", s)
}

// RowDecoder turns rows read by a query of an outbox table (every column,
// in text format) into events, as an INSERT of the row would decode: the
// backfill's path.
type RowDecoder struct{ rel *relation }

// Rows returns a decoder for rows of the relation m describes: the query's
// columns by name and type, under the table's schema and name.
func (d *Decoder) Rows(m *pglogrepl.RelationMessage) *RowDecoder {
	return &RowDecoder{rel: d.newRelation(m)}
}

// Event decodes one row: values in the relation's column order, nil for
// NULL. The event owns its bytes; commit is the snapshot's position.
func (rd *RowDecoder) Event(values [][]byte, commit pglogrepl.LSN, at time.Time) (Event, error) {
	t := tuple{kind: make([]byte, len(values)), data: values}
	for i, v := range values {
		t.kind[i] = pglogrepl.TupleDataTypeText
		if v == nil {
			t.kind[i] = pglogrepl.TupleDataTypeNull
		}
	}
	ev, err := rd.rel.event(&t)
	if err != nil {
		if rowErr, ok := err.(*InvalidRowError); ok {
			rowErr.CommitLSN, rowErr.Mapping = commit, rd.rel.cols
		}
		return Event{}, err
	}
	ev.CommitLSN, ev.CommitTime, ev.Table = commit, at, rd.rel.name
	if ev.Time.IsZero() {
		ev.Time = at
	}
	return ev, nil
}
