// Package inbox is for the services that consume events: an idempotent
// consumer. outbox-cdc delivers at least once, so after a crash a consumer
// may see an event again. Claim records the event's id in an inbox table
// inside the consumer's own transaction, under a unique key, and reports
// whether it was the first time: the side effect and the dedupe record then
// commit, or roll back, together.
//
//	rec, err := inbox.FromKafkaGo(msg)
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		first, err := box.Claim(ctx, tx, rec)
//		if err != nil || !first {
//			return err // seen before: already applied
//		}
//		return apply(ctx, tx, msg)
//	})
package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IDHeader is the header outbox-cdc puts the event id in.
const IDHeader = "id"

// Record identifies one consumed event: its id, and where it was read.
type Record struct {
	EventID   string
	Topic     string
	Partition int32
	Offset    int64
}

// ErrNoID is a record without an id header: not from outbox-cdc.
var ErrNoID = errors.New("record has no id header")

// FromKafkaGo reads a segmentio/kafka-go message.
func FromKafkaGo(m kafka.Message) (Record, error) {
	for _, h := range m.Headers {
		if h.Key == IDHeader && len(h.Value) > 0 {
			return Record{EventID: string(h.Value), Topic: m.Topic, Partition: int32(m.Partition), Offset: m.Offset}, nil
		}
	}
	return Record{}, fmt.Errorf("%s/%d@%d: %w", m.Topic, m.Partition, m.Offset, ErrNoID)
}

// FromFranz reads a twmb/franz-go record.
func FromFranz(r *kgo.Record) (Record, error) {
	for _, h := range r.Headers {
		if h.Key == IDHeader && len(h.Value) > 0 {
			return Record{EventID: string(h.Value), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, nil
		}
	}
	return Record{}, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, ErrNoID)
}

// Inbox is one consumer's inbox table. Consumers that apply the same event
// independently need a table each (or a Name each).
type Inbox struct {
	table string
}

// New returns the inbox in table (schema.table or table; default inbox).
func New(table string) *Inbox {
	if table == "" {
		table = "inbox"
	}
	schema, name, ok := strings.Cut(table, ".")
	if !ok {
		return &Inbox{table: pgx.Identifier{table}.Sanitize()}
	}
	return &Inbox{table: pgx.Identifier{schema, name}.Sanitize()}
}

// CreateTableSQL is the DDL of the inbox table, for migrations.
func (i *Inbox) CreateTableSQL() string {
	return `CREATE TABLE IF NOT EXISTS ` + i.table + ` (
    event_id     text        PRIMARY KEY,
    topic        text        NOT NULL,
    "partition"  integer     NOT NULL,
    "offset"     bigint      NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
)`
}

func (i *Inbox) claimSQL() string {
	return `INSERT INTO ` + i.table + ` (event_id, topic, "partition", "offset") VALUES ($1, $2, $3, $4) ON CONFLICT (event_id) DO NOTHING`
}

// Claim records r in tx and reports whether this is the event's first
// delivery. When it is not, the caller skips the side effect; when it is,
// the claim holds only if tx commits.
func (i *Inbox) Claim(ctx context.Context, tx pgx.Tx, r Record) (bool, error) {
	if r.EventID == "" {
		return false, ErrNoID
	}
	tag, err := tx.Exec(ctx, i.claimSQL(), r.EventID, r.Topic, r.Partition, r.Offset)
	if err != nil {
		return false, fmt.Errorf("claim event %s in %s: %w", r.EventID, i.table, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimSQL is Claim for a database/sql transaction.
func (i *Inbox) ClaimSQL(ctx context.Context, tx *sql.Tx, r Record) (bool, error) {
	if r.EventID == "" {
		return false, ErrNoID
	}
	res, err := tx.ExecContext(ctx, i.claimSQL(), r.EventID, r.Topic, r.Partition, r.Offset)
	if err != nil {
		return false, fmt.Errorf("claim event %s in %s: %w", r.EventID, i.table, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Prune deletes claims older than age, returning how many. Keep age well
// beyond how far back a redelivery can reach (the relay replays at most
// what it had not confirmed; Kafka consumers rewind at most to their
// committed offsets).
func (i *Inbox) Prune(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, age time.Duration) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM `+i.table+` WHERE processed_at < now() - make_interval(secs => $1)`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", i.table, err)
	}
	return tag.RowsAffected(), nil
}
