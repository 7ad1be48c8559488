package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultColumns is the outbox table of sql/publication.sql.
const DefaultColumns = `
	id uuid primary key,
	aggregate_type text not null,
	aggregate_id text not null,
	event_type text not null,
	payload jsonb not null,
	headers jsonb,
	created_at timestamptz not null default now()`

// Outbox is one test's own outbox table, with a publication and a slot of
// the same name, which also prefixes its topics.
type Outbox struct {
	Name string        // table, publication, slot and topic prefix
	DB   *pgxpool.Pool // to URL, closed when the test ends
	URL  string        // the Postgres the table is in
}

// OutboxOption shapes NewOutbox's table.
type OutboxOption func(*outboxOptions)

type outboxOptions struct {
	columns string
}

// WithColumns gives the table these columns (the body of a CREATE TABLE)
// instead of DefaultColumns: a legacy layout, a table without headers.
func WithColumns(columns string) OutboxOption {
	return func(o *outboxOptions) { o.columns = columns }
}

// NewOutbox creates a table named prefix_<random> in the Postgres at pgURL.
// The name is unique per run because topics outlive a test and -count=N
// reruns it. When the test ends the slot (once its relay has let go of it:
// an inactive slot pins WAL), the publication and the table are dropped;
// when it failed, the slot's state is logged first.
func NewOutbox(t testing.TB, pgURL, prefix string, opts ...OutboxOption) *Outbox {
	t.Helper()
	cfg := outboxOptions{columns: DefaultColumns}
	for _, opt := range opts {
		opt(&cfg)
	}
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1e9)
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	if err := createTable(ctx, db, name, cfg.columns); err != nil {
		db.Close()
		t.Fatal(err)
	}
	o := &Outbox{Name: name, DB: db, URL: pgURL}
	// Registered before any relay's cleanup, so it runs after the relay
	// is stopped.
	t.Cleanup(func() { o.drop(t) })
	return o
}

func (o *Outbox) drop(t testing.TB) {
	ctx := context.Background()
	if t.Failed() {
		var state string
		_ = o.DB.QueryRow(ctx, fmt.Sprintf(`SELECT format('slot confirmed %%s, active %%s, wal now %%s, %%s rows in %s',
			confirmed_flush_lsn, active, pg_current_wal_lsn(), (SELECT count(*) FROM %s)) FROM pg_replication_slots WHERE slot_name = $1`, o.Name, o.Name), o.Name).Scan(&state)
		t.Logf("at failure: %s", state)
	}
	if err := dropSlot(ctx, o.DB, o.Name); err != nil {
		t.Error(err)
	}
	_, _ = o.DB.Exec(ctx, "DROP PUBLICATION IF EXISTS "+o.Name)
	_, _ = o.DB.Exec(ctx, "DROP TABLE IF EXISTS "+o.Name)
	o.DB.Close()
}

// Args are the relay's flags for this outbox, its Kafka at brokers; extra
// flags follow them.
func (o *Outbox) Args(brokers string, extra ...string) []string {
	if exactlyOnce() {
		extra = append([]string{"--delivery", "exactly-once", "--checkpoint-topic", o.Name + "_checkpoints"}, extra...) // not under o.Name + ".": tests count the topics there
	}
	return append([]string{
		"--postgres-url", o.URL,
		"--kafka-brokers", brokers,
		"--table", "public." + o.Name,
		"--publication", o.Name,
		"--slot", o.Name,
		"--topic", o.Name + ".{aggregate_type}",
		"--status-interval", "1s",
		"--http-addr", "127.0.0.1:0", // several relays run at once; see Relay.HTTPAddr
	}, extra...)
}

// Confirmed returns the slot's confirmed_flush_lsn.
func (o *Outbox) Confirmed(t testing.TB) pglogrepl.LSN {
	t.Helper()
	lsn, err := slotConfirmed(context.Background(), o.DB, o.Name)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// CurrentLSN returns pg_current_wal_insert_lsn(): taken right after a
// commit, the end of that commit record (unless something else wrote WAL
// meanwhile, which only makes it later).
func (o *Outbox) CurrentLSN(t testing.TB) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := o.DB.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		t.Fatalf("read wal lsn: %v", err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatalf("parse lsn %q: %v", s, err)
	}
	return lsn
}

// CreateTable creates table name with columns (DefaultColumns, say) in the
// Postgres at pgURL, for a test or an Example that names its own table and
// drops nothing.
func CreateTable(ctx context.Context, pgURL, name, columns string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	return createTable(ctx, conn, name, columns)
}

// SlotConfirmed returns the confirmed_flush_lsn of slot in the Postgres at
// pgURL.
func SlotConfirmed(t testing.TB, pgURL, slot string) pglogrepl.LSN {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	lsn, err := slotConfirmed(ctx, conn, slot)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// DropSlot drops slot in the Postgres at pgURL, waiting up to 10 s for its
// relay to let go of it; a slot left behind fails the test.
func DropSlot(t testing.TB, pgURL, slot string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Errorf("connect to postgres: %v", err)
		return
	}
	defer conn.Close(ctx)
	if err := dropSlot(ctx, conn, slot); err != nil {
		t.Error(err)
	}
}

// execer and querier are what these helpers need of a pgx.Conn or a
// pgxpool.Pool.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func createTable(ctx context.Context, db execer, name, columns string) error {
	if _, err := db.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", pgx.Identifier{name}.Sanitize(), columns)); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}

func slotConfirmed(ctx context.Context, db querier, slot string) (pglogrepl.LSN, error) {
	var s string
	if err := db.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
		return 0, fmt.Errorf("read slot %s: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("parse lsn %q of slot %s: %w", s, slot, err)
	}
	return lsn, nil
}

// dropSlot drops slot, if it exists, retrying for 10 s while a relay that
// is stopping still holds it.
func dropSlot(ctx context.Context, db execer, slot string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drop slot %s: %w", slot, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
