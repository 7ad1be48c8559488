package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// killDuringBackfill kills r with SIGKILL soon after its backfill first
// recorded progress, and fails the test if the backfill was done by then.
func killDuringBackfill(t *testing.T, o *outbox, r *relay) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var done int64
		_ = o.db.QueryRow(ctx, `SELECT done FROM outbox_cdc_backfill WHERE slot = $1`, o.name).Scan(&done)
		if done > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no backfill progress recorded a minute after the relay started")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	var phase string
	if err := o.db.QueryRow(ctx, `SELECT phase FROM outbox_cdc_backfill WHERE slot = $1`, o.name).Scan(&phase); err != nil || phase == "done" {
		t.Fatalf("backfill phase %q (%v) at the kill: the test proves nothing", phase, err)
	}
}

// explainUnmarked logs, when t fails, the rows left unmarked (with their
// order key and inserting transaction) and the backfill's progress.
func explainUnmarked(t *testing.T, o *outbox) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		rows, err := o.db.Query(ctx, fmt.Sprintf(`SELECT message_id::text, created_at::text, cmin::text, xmin::text, status FROM %s
			WHERE status <> 'Published' OR published_at IS NULL ORDER BY created_at, cmin::text::bigint, message_id LIMIT 20`, o.name))
		if err == nil {
			left, _ := pgx.CollectRows(rows, pgx.RowToMap)
			for _, l := range left {
				t.Logf("unmarked: %v", l)
			}
		}
		rows, err = o.db.Query(ctx, `SELECT * FROM outbox_cdc_backfill WHERE slot = $1`, o.name)
		if err == nil {
			prog, _ := pgx.CollectRows(rows, pgx.RowToMap)
			t.Logf("backfill progress: %v", prog)
		}
	})
}
