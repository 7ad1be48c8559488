package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/message"
)

// Emit writes events inside tx as transactional logical decoding messages,
// pg_logical_emit_message(true, prefix, content), and returns their ids. No
// row is stored: Postgres decodes the messages when tx commits, in commit
// order with tx's other changes, and never if it rolls back; the relay
// publishes them like outbox rows (same topic routing, key, headers and
// dead letters). Columns are refused: a message has none (use Headers).
//
// The role needs EXECUTE on pg_logical_emit_message(boolean, text, bytea),
// which Postgres grants to PUBLIC unless it was revoked. sql/outbox_emit.sql
// writes the same messages from SQL, for services in other languages.
func (w *Writer) Emit(ctx context.Context, tx pgx.Tx, events ...Event) ([]string, error) {
	return w.emit(events, func(sql string, args ...any) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// EmitSQL is Emit for a database/sql transaction.
func (w *Writer) EmitSQL(ctx context.Context, tx *sql.Tx, events ...Event) ([]string, error) {
	return w.emit(events, func(sql string, args ...any) error {
		_, err := tx.ExecContext(ctx, sql, args...)
		return err
	})
}

// Many messages go in one statement; unnest yields them, and the calls are
// made, in the order given.
const (
	emitOne  = `SELECT pg_logical_emit_message(true, $1, $2::bytea)`
	emitMany = `SELECT count(pg_logical_emit_message(true, $1, m)) FROM unnest($2::bytea[]) AS m`
)

func (w *Writer) emit(events []Event, exec func(string, ...any) error) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	ids := make([]string, len(events))
	contents := make([][]byte, len(events))
	for i := range events {
		ev := &events[i]
		b, err := encode(ev)
		if err != nil {
			return nil, fmt.Errorf("outbox event %d (%s %s): %w", i, ev.AggregateType, ev.EventType, err)
		}
		ids[i], contents[i] = ev.ID, b
	}
	var err error
	if len(contents) == 1 {
		err = exec(emitOne, w.prefix, contents[0])
	} else {
		err = exec(emitMany, w.prefix, contents)
	}
	if err != nil {
		return nil, fmt.Errorf("emit %d events as messages %q: %w", len(events), w.prefix, err)
	}
	return ids, nil
}

// encode turns ev into a message's content, giving it an id if it has none.
func encode(ev *Event) ([]byte, error) {
	if len(ev.Columns) > 0 {
		return nil, errors.New("columns are for outbox rows; a message carries Headers")
	}
	if ev.AggregateID == "" {
		return nil, errors.New("empty aggregate id: it is the Kafka message key")
	}
	if ev.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		ev.ID = id.String()
	}
	m := message.Event{ID: ev.ID, AggregateType: ev.AggregateType, AggregateID: ev.AggregateID, EventType: ev.EventType,
		ContentType: ev.ContentType, Time: ev.Time}
	switch p := ev.Payload.(type) {
	case nil:
		return nil, errors.New("nil payload")
	case json.RawMessage:
		m.Payload = p
	case []byte:
		m.Payload = p
		if m.ContentType == "" {
			m.ContentType = "application/octet-stream"
		}
	case string:
		m.Payload = []byte(p)
		if m.ContentType == "" {
			m.ContentType = "text/plain; charset=utf-8"
		}
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("marshal payload: %w", err)
		}
		m.Payload = b
	}
	for _, k := range slices.Sorted(maps.Keys(ev.Headers)) {
		m.Headers = append(m.Headers, message.Header{Key: k, Value: []byte(ev.Headers[k])})
	}
	return message.Append(nil, &m)
}
