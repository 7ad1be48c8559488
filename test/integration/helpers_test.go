package integration

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// defaultColumns is the outbox table of sql/publication.sql.
const defaultColumns = testkit.DefaultColumns

// outbox is a testkit.Outbox under the short names this package's tests
// use.
type outbox struct {
	*testkit.Outbox
	name string        // Outbox.Name: table, publication, slot and topic prefix
	db   *pgxpool.Pool // Outbox.DB
}

// newOutbox is one test's own table of columns, with its publication and
// slot, on the package's Postgres.
func newOutbox(t *testing.T, prefix, columns string) *outbox {
	t.Helper()
	o := testkit.NewOutbox(t, pg.URL, prefix, testkit.WithColumns(columns))
	return &outbox{Outbox: o, name: o.Name, db: o.DB}
}

// args are the relay flags for this outbox on the package's broker; extra
// ones follow.
func (o *outbox) args(extra ...string) []string {
	return o.Args(broker.Brokers, extra...)
}

// row is an outbox row as the tests write it.
type row struct {
	ID, AggregateType, AggregateID, EventType, Payload string
	Headers                                            *string
}

// insertTx inserts rows in one transaction, committed or rolled back.
func (o *outbox) insertTx(ctx context.Context, rows []row, commit bool) error {
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	batch := &pgx.Batch{}
	for _, r := range rows {
		batch.Queue(fmt.Sprintf("INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4, $5, $6)", o.name),
			r.ID, r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// relay is a testkit.Relay under the short names this package's tests use.
type relay struct {
	*testkit.Relay
	cmd     *exec.Cmd       // Relay.Cmd
	log     string          // Relay.Log
	done    <-chan struct{} // Relay.Done()
	started time.Time       // Relay.Started
}

// startRelay starts the package's outbox-cdc (built with -race) and waits
// until its slot streams.
func startRelay(t *testing.T, args ...string) *relay {
	t.Helper()
	return startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, PostgresURL: pg.URL})
}

// startRelayEnv is startRelay with another build of outbox-cdc and extra
// environment variables.
func startRelayEnv(t *testing.T, binary string, env []string, args ...string) *relay {
	t.Helper()
	return startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, Env: env, PostgresURL: pg.URL})
}

// startRelayNoWait starts the relay without waiting for its slot to stream
// (a backfill runs first).
func startRelayNoWait(t *testing.T, args ...string) *relay {
	t.Helper()
	return startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, NoWait: true})
}

func startRelayWith(t *testing.T, c testkit.RelayCommand) *relay {
	t.Helper()
	r := testkit.StartRelay(t, c)
	return &relay{Relay: r, cmd: r.Cmd, log: r.Log, done: r.Done(), started: r.Started}
}

// consume waits until the topics, on the package's broker, hold at least
// want distinct events, then returns every message they hold (see
// testkit.Consume).
func consume(t *testing.T, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	return testkit.Consume(t, broker.Brokers, topics, want, timeout)
}
