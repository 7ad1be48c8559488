package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestCleanupWaitsForVisibility: a row whose transaction the slot streamed
// but other sessions do not see yet is cleaned once they do, never taken
// for gone. A commit marks the transaction committed in the commit log
// (pg_xact_status says "committed") before it leaves the process array
// (snapshots still see it running); a synchronous standby that never
// answers holds a commit exactly there, and logical decoding streams it
// meanwhile. The DELETE finds nothing: the cleaner must not settle the
// event until the row is visible, or the row stays in the table for good.
func TestCleanupWaitsForVisibility(t *testing.T) {
	ctx := context.Background()
	o := newOutbox(t, "cleanvis", defaultColumns)
	startRelay(t, o.args("--cleanup", "delete-after-publish")...)
	warm := uuid.NewString()
	if err := o.insertTx(ctx, []row{{ID: warm, AggregateType: "order", AggregateID: "a", EventType: "Created", Payload: `{}`}}, true); err != nil {
		t.Fatal(err)
	}
	o.waitEmpty(t, nil, 30*time.Second)

	admin, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	syncStandby := func(name string) {
		t.Helper()
		if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%s'", name)); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // the checkpointer publishes it to the walsenders' shared state
	}
	syncStandby("outbox_cdc_test_nobody")
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pg.URL)
		if err != nil {
			t.Logf("reset synchronous_standby_names: %v", err)
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "ALTER SYSTEM RESET synchronous_standby_names")
		_, _ = c.Exec(context.Background(), "SELECT pg_reload_conf()")
	})

	writer, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(ctx)
	var pid int
	if err := writer.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	committed := make(chan error, 1)
	go func() { // ends once synchronous_standby_names is reset below
		_, err := writer.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', 'b', 'Created', '{}')", o.name), id)
		committed <- err
	}()
	msgs := consume(t, []string{o.name + ".order"}, 2, 30*time.Second)
	arrived := false
	for _, m := range msgs {
		got, _ := testkit.Header(m, "id")
		arrived = arrived || got == id
	}
	if !arrived {
		t.Fatalf("the held commit's event %s did not arrive", id)
	}
	var wait, status string
	var visible bool
	if err := admin.QueryRow(ctx, `SELECT coalesce(wait_event, ''), coalesce(pg_xact_status(backend_xid::text::xid8), ''),
		pg_visible_in_snapshot(backend_xid::text::xid8, pg_current_snapshot()) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&wait, &status, &visible); err != nil || wait != "SyncRep" {
		t.Fatalf("the writer waits on %q (%v), want SyncRep: the test proves nothing", wait, err)
	}
	t.Logf("held commit: pg_xact_status %q, visible in a new snapshot: %v", status, visible)
	time.Sleep(2 * time.Second) // the cleaner tries, and finds nothing
	syncStandby("")
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	o.waitEmpty(t, nil, 15*time.Second)
}
