package integration

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// How the slot heal tests lose a slot, on a Postgres of their own or the
// package's.

// startLossyPostgres starts a cluster of the test's own with
// max_slot_wal_keep_size = 1MB: a slot whose relay is away while more than
// a megabyte of WAL is written loses that WAL at the next checkpoint. Not
// the package's Postgres: the setting is the whole cluster's.
func startLossyPostgres(t *testing.T) *testkit.Postgres {
	t.Helper()
	server, err := testkit.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop() }) // registered first: runs after the outboxes' and relays' cleanups
	execAt(t, server.URL, `ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`, `SELECT pg_reload_conf()`)
	return server
}

// execAt runs stmts, one at a time, in the Postgres at url.
func execAt(t *testing.T, url string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// newOutboxOn is newOutbox in the Postgres at url.
func newOutboxOn(t *testing.T, url, prefix string) *outbox {
	t.Helper()
	ob := testkit.NewOutbox(t, url, prefix)
	return &outbox{Outbox: ob, name: ob.Name, db: ob.DB}
}

// startRelayOn is startRelay for a relay whose --postgres-url is url.
func startRelayOn(t *testing.T, url string, args ...string) *relay {
	t.Helper()
	return startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, PostgresURL: url})
}

// stopRelay stops r with SIGTERM, which must end it with exit 0.
func stopRelay(t *testing.T, r *relay) {
	t.Helper()
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, testkit.Tail(r.LogText(), 30))
	}
}

// slotWALStatus is o's slot's wal_status, "" when it has none or the slot
// does not exist.
func slotWALStatus(t *testing.T, o *outbox) string {
	t.Helper()
	var s string
	err := o.db.QueryRow(context.Background(), `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&s)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return s
}

// loseSlot writes WAL in o's Postgres (a startLossyPostgres), a round at a
// time, until o's slot, which no relay may hold, is lost (wal_status
// lost): each round calls round (the outbox's own writes going on
// meanwhile), inserts a megabyte into a filler table, switches to a new
// segment and checkpoints, which removes the WAL past
// max_slot_wal_keep_size and invalidates the slot.
func loseSlot(t *testing.T, o *outbox, round func()) {
	t.Helper()
	if s := slotWALStatus(t, o); s == "" || s == "lost" {
		t.Fatalf("slot %s before the WAL churn: wal_status %q, want a slot that still has its WAL", o.name, s)
	}
	ctx := context.Background()
	if _, err := o.db.Exec(ctx, `CREATE TABLE IF NOT EXISTS heal_filler (b text)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; slotWALStatus(t, o) != "lost"; i++ {
		if i == 40 {
			t.Fatalf("slot %s: wal_status %q after 40 rounds of WAL past max_slot_wal_keep_size, want lost", o.name, slotWALStatus(t, o))
		}
		round()
		for _, q := range []string{`INSERT INTO heal_filler SELECT repeat('x', 1000) FROM generate_series(1, 1000)`, `SELECT pg_switch_wal()`, `CHECKPOINT`} {
			if _, err := o.db.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// dropActiveSlot drops slot under the relay streaming from it: it ends the
// walsender holding it, waiting for it to exit, and drops the slot before
// the relay reconnects; when the relay is back first ("is active", SQLSTATE
// 55006), it tries again, for up to 30 s. It returns the attempts taken.
func dropActiveSlot(t *testing.T, o *outbox) int {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 1; ; attempt++ {
		if _, err := o.db.Exec(ctx, `SELECT pg_terminate_backend(active_pid, 5000) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, o.name); err != nil {
			t.Fatalf("terminate the walsender of slot %s: %v", o.name, err)
		}
		_, err := o.db.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, o.name)
		if err == nil {
			return attempt
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			t.Fatalf("drop slot %s (attempt %d): %v", o.name, attempt, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
