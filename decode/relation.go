package decode

import (
	"encoding/binary"
	"fmt"
	"slices"
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
	part                                int   // Columns.Partition's position; -1: none
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
	r.part = -1
	if r.cols.Partition != "" {
		if r.part = index(r.cols.Partition); r.part < 0 && r.err == nil {
			r.err = fmt.Errorf("outbox table %s has no column %q (--column-partition)", r.name, r.cols.Partition)
		}
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
