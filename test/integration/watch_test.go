package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Found by the review of issue 22's change: the watcher must tell a table
// removed from the publication from a renamed one, and a backfill cut short
// on a table renamed since must not be silently dropped.

// TestRemovedFromPublicationIsNotARename: ALTER PUBLICATION … DROP TABLE
// leaves the table, under its name, out of the slot: the relay stops
// saying so and how to recover, not that the table was renamed.
func TestRemovedFromPublicationIsNotARename(t *testing.T) {
	o := newOutbox(t, "pubdrop", defaultColumns)
	r := startRelay(t, o.args("--heartbeat-interval", "1s")...)
	o.exec(t, "ALTER PUBLICATION $T DROP TABLE $T")
	log := r.waitFailure(t, 30*time.Second, "its table was removed from the publication")
	last := lastLine(log)
	if !strings.Contains(last, "no longer in publication") || strings.Contains(last, "renamed") {
		t.Errorf("last line %q; want the table named as no longer in the publication, not as renamed", last)
	}
}

// TestBackfillCutShortThenRenamed: a backfill killed part way, its table
// renamed before the restart: started under the new name the relay refuses
// (exit 1, the record to move named) instead of streaming without the rest
// of the backfill.
func TestBackfillCutShortThenRenamed(t *testing.T) {
	o := newOutbox(t, "bfrename", defaultColumns)
	renamed := o.name + "_new"
	ctx := context.Background()
	t.Cleanup(func() { _, _ = o.db.Exec(ctx, "DROP TABLE IF EXISTS "+renamed) })
	writePending(t, o.db, o.name, 3000, 10, 0)
	args := o.args("--backfill-where", "true", "--max-in-flight", "10", "--batch-timeout", "50ms")
	killAfter(t, o, startRelayNoWait(t, args...), o.name+".Order", 100, 0)
	o.exec(t, "ALTER TABLE $T RENAME TO "+renamed)
	code, out := runOnce(t, append(without(args, "--table"), "--table", "public."+renamed)...)
	if last := lastLine(out); code != 1 || !strings.Contains(last, "cut short") || !strings.Contains(last, "UPDATE outbox_cdc_backfill") {
		t.Errorf("restart under the new name: exit %d, last line %q; want exit 1 naming the backfill cut short and the UPDATE that moves it", code, last)
	}
	var active bool
	_ = o.db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&active)
	if active {
		t.Error("the relay streams the slot though the backfill was not finished")
	}
}
