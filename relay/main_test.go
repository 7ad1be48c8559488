package relay_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

// The real servers of this package's tests and Example, started by TestMain.
var pgURL, kafkaBrokers string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("relay: skipped in -short mode (the Example and the tests need Postgres and Kafka)")
		os.Exit(0)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	pg, err := harness.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay: start postgres:", err)
		return 1
	}
	defer pg.Stop()
	k, err := harness.StartKafka()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay: start kafka:", err)
		return 1
	}
	defer k.Stop()
	defer harness.StopBeforeTimeout(k.Stop, pg.Stop)()
	pgURL, kafkaBrokers = pg.URL, k.Brokers
	return m.Run()
}

// createOutbox creates an outbox table shaped like sql/publication.sql's.
func createOutbox(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (
		id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
		payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now())`, pgx.Identifier{name}.Sanitize()))
	return err
}

// slotConfirmed reads a slot's confirmed_flush_lsn.
func slotConfirmed(ctx context.Context, t *testing.T, slot string) pglogrepl.LSN {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// dropSlot drops a test's slot once its relay has let go of it.
func dropSlot(t *testing.T, slot string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("drop slot %s: %v", slot, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
