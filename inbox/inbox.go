package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// FromHeaders builds the Record of the event read at topic/partition@offset
// from its headers, given as key/value pairs so that any client's header
// type fits without copying: a closure over its slice, or maps.All over a
// map. The first id header with a value wins; without one the error wraps
// ErrNoID and names where the record was read, so the consumer can log it
// and decide whether to skip it. Packages inbox/kafkago and inbox/franz do
// this for segmentio/kafka-go and twmb/franz-go.
func FromHeaders(topic string, partition int32, offset int64, headers iter.Seq2[string, []byte]) (Record, error) {
	if headers != nil {
		for k, v := range headers {
			if k == IDHeader && len(v) > 0 {
				return Record{EventID: string(v), Topic: topic, Partition: partition, Offset: offset}, nil
			}
		}
	}
	return Record{}, fmt.Errorf("%s/%d@%d: %w", topic, partition, offset, ErrNoID)
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
