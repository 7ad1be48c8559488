// Package outbox is for the services that write events: it inserts them into
// the outbox table inside the caller's own transaction, so that the business
// change and its events commit, or roll back, together. outbox-cdc then
// relays them from the WAL. Use the same column mapping as the relay.
//
//	w := outbox.NewWriter(outbox.Config{}) // public.outbox, the relay's default columns
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1`, id); err != nil {
//			return err
//		}
//		_, err := w.Write(ctx, tx, outbox.Event{AggregateType: "order", AggregateID: id, EventType: "OrderPaid", Payload: paid})
//		return err
//	})
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Columns name the outbox table's columns, as the relay's --column-* flags
// do. Empty fields take the relay's defaults.
type Columns struct {
	ID            string // default id
	AggregateType string // default aggregate_type
	AggregateID   string // default aggregate_id
	EventType     string // default event_type
	Payload       string // default payload
	Headers       string // default headers; "-" when the table has none
	Timestamp     string // default created_at; "-" when the table has none
}

// Config says where events go.
type Config struct {
	Table   string // schema.table or table; default public.outbox
	Columns Columns
	// MessagePrefix is the prefix Emit writes its messages under, the
	// relay's --message-prefix; default "outbox".
	MessagePrefix string
}

// Event is one event to write.
type Event struct {
	ID            string // empty: a new UUIDv7, time-ordered
	AggregateType string
	AggregateID   string // the Kafka message key: one aggregate's events stay in order
	EventType     string
	// Payload becomes the Kafka message value: []byte, json.RawMessage and
	// string are stored as they are; any other value is marshalled to JSON.
	Payload any
	// Headers become Kafka headers, through the headers column.
	Headers map[string]string
	// Columns are further columns of the outbox table, such as those the
	// relay sends with --header-column (correlation_id, tenant_id,
	// traceparent). A column missing from one event of a batch is NULL.
	Columns map[string]any
	// Time is the message timestamp; zero: the column's default (now()),
	// or, for Emit, the commit time.
	Time time.Time
	// ContentType is the payload's media type, for Emit (a table's payload
	// column has a type that says it); empty: application/json, or
	// text/plain; charset=utf-8 for a string, application/octet-stream for
	// []byte.
	ContentType string
}

// Writer writes events into the caller's transaction: Write inserts rows
// into the outbox table, Emit writes logical decoding messages. It is safe
// for concurrent use.
type Writer struct {
	table  string
	cols   Columns
	prefix string
}

// NewWriter returns a writer for cfg's table.
func NewWriter(cfg Config) *Writer {
	c := cfg.Columns
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&c.ID, "id")
	def(&c.AggregateType, "aggregate_type")
	def(&c.AggregateID, "aggregate_id")
	def(&c.EventType, "event_type")
	def(&c.Payload, "payload")
	def(&c.Headers, "headers")
	def(&c.Timestamp, "created_at")
	table := cfg.Table
	if table == "" {
		table = "public.outbox"
	}
	schema, name, ok := strings.Cut(table, ".")
	if !ok {
		schema, name = "public", table
	}
	prefix := cfg.MessagePrefix
	if prefix == "" {
		prefix = "outbox"
	}
	return &Writer{table: pgx.Identifier{schema, name}.Sanitize(), cols: c, prefix: prefix}
}

// maxParams is Postgres's limit of parameters in one statement.
const maxParams = 65535

// Write inserts events inside tx, in as few statements as the parameter
// limit allows (one for up to thousands of events), and returns their ids.
func (w *Writer) Write(ctx context.Context, tx pgx.Tx, events ...Event) ([]string, error) {
	return w.write(events, func(sql string, args []any) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// WriteSQL is Write for a database/sql transaction (with the pgx stdlib
// driver, or any driver that takes $n placeholders).
func (w *Writer) WriteSQL(ctx context.Context, tx *sql.Tx, events ...Event) ([]string, error) {
	return w.write(events, func(sql string, args []any) error {
		_, err := tx.ExecContext(ctx, sql, args...)
		return err
	})
}

func (w *Writer) write(events []Event, exec func(string, []any) error) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	cols, err := w.columns(events)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(events))
	perStmt := maxParams / len(cols)
	for start := 0; start < len(events); start += perStmt {
		chunk := events[start:min(start+perStmt, len(events))]
		var b strings.Builder
		b.WriteString("INSERT INTO ")
		b.WriteString(w.table)
		b.WriteString(" (")
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pgx.Identifier{c.name}.Sanitize())
		}
		b.WriteString(") VALUES ")
		args := make([]any, 0, len(chunk)*len(cols))
		for i := range chunk {
			ev := &chunk[i]
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j, c := range cols {
				if j > 0 {
					b.WriteString(", ")
				}
				v, err := c.value(ev)
				if err != nil {
					return nil, fmt.Errorf("outbox event %d (%s %s): %w", start+i, ev.AggregateType, ev.EventType, err)
				}
				args = append(args, v)
				fmt.Fprintf(&b, "$%d", len(args))
			}
			b.WriteByte(')')
			ids[start+i] = args[len(args)-len(cols)].(string)
		}
		if err := exec(b.String(), args); err != nil {
			return nil, fmt.Errorf("insert %d events into %s: %w", len(chunk), w.table, err)
		}
	}
	return ids, nil
}

// column is one column of the INSERT and how an event fills it.
type column struct {
	name  string
	value func(*Event) (any, error)
}

func (w *Writer) columns(events []Event) ([]column, error) {
	c := w.cols
	cols := []column{
		{c.ID, func(e *Event) (any, error) {
			if e.ID == "" {
				id, err := uuid.NewV7()
				if err != nil {
					return nil, err
				}
				e.ID = id.String()
			}
			return e.ID, nil
		}},
		{c.AggregateType, func(e *Event) (any, error) { return e.AggregateType, nil }},
		{c.AggregateID, func(e *Event) (any, error) {
			if e.AggregateID == "" {
				return nil, errors.New("empty aggregate id: it is the Kafka message key")
			}
			return e.AggregateID, nil
		}},
		{c.EventType, func(e *Event) (any, error) { return e.EventType, nil }},
		{c.Payload, func(e *Event) (any, error) { return payload(e.Payload) }},
	}
	var headers, times bool
	extra := map[string]bool{}
	for i := range events {
		headers = headers || len(events[i].Headers) > 0
		times = times || !events[i].Time.IsZero()
		for k := range events[i].Columns {
			extra[k] = true
		}
	}
	if headers {
		if c.Headers == "-" {
			return nil, errors.New("events have headers, but the outbox table has no headers column")
		}
		cols = append(cols, column{c.Headers, func(e *Event) (any, error) {
			if len(e.Headers) == 0 {
				return nil, nil
			}
			b, err := json.Marshal(e.Headers)
			return string(b), err
		}})
	}
	if times && c.Timestamp != "-" {
		cols = append(cols, column{c.Timestamp, func(e *Event) (any, error) {
			if e.Time.IsZero() {
				return time.Now(), nil
			}
			return e.Time, nil
		}})
	}
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		cols = append(cols, column{name, func(e *Event) (any, error) { return e.Columns[name], nil }})
	}
	return cols, nil
}

// payload turns a payload into what the column takes: bytes and strings as
// they are, anything else as JSON.
func payload(p any) (any, error) {
	switch v := p.(type) {
	case nil:
		return nil, errors.New("nil payload")
	case json.RawMessage:
		return string(v), nil
	case []byte:
		return v, nil
	case string:
		return v, nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal payload: %w", err)
		}
		return string(b), nil
	}
}
