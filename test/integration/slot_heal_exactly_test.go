package integration

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestSlotHealExactlyOnceAfterRestore restores, under an exactly-once relay
// with --on-slot-lost heal, a base backup (no slot) taken before the
// relay's last run: the checkpoint names a position the restored server's
// WAL has not reached, on the same system and timeline. The heal's new
// slot starts below it, and what the heal commits is at that slot's
// consistent point: the stream after it neither stops as on a restored
// database nor skips the restored server's new transactions, whether the
// heal published rows or none.
func TestSlotHealExactlyOnceAfterRestore(t *testing.T) {
	slowFault(t)
	t.Setenv("OUTBOX_TEST_DELIVERY", "exactly-once") // what it reads, it reads at read_committed
	for _, tc := range []struct {
		name    string
		waiting int // rows the restored outbox holds when the relay starts
	}{{"rows to heal", 5}, {"nothing to heal", 0}} {
		t.Run(tc.name, func(t *testing.T) { healExactlyAfterRestore(t, tc.waiting) })
	}
}

func healExactlyAfterRestore(t *testing.T, waiting int) {
	ctx := context.Background()
	server, err := testkit.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop() })
	o := newOutboxOn(t, server.URL, "healxrestore")
	args := exactlyArgs(o, healArgs...)
	topics := []string{o.name + ".order"}

	r := startRelayOn(t, server.URL, args...)
	a := insertSingles(ctx, t, server.URL, o.name, 10)
	consumeCommitted(t, topics, len(a), time.Minute)
	o.waitEmpty(t, nil, 30*time.Second)
	stopRelay(t, r)
	if err := server.BaseBackup(); err != nil {
		t.Fatal(err)
	}
	o.db.Reset()
	r = startRelayOn(t, server.URL, args...)
	// WAL the restore takes back: the checkpoint of B ends past it, and
	// past where the restored server's new slot begins.
	execAt(t, server.URL, `CREATE TABLE `+o.name+`_filler (x text)`,
		`INSERT INTO `+o.name+`_filler SELECT repeat('x', 1000) FROM generate_series(1, 5000)`)
	b := insertSingles(ctx, t, server.URL, o.name, 30)
	consumeCommitted(t, topics, len(a)+len(b), time.Minute)
	o.waitEmpty(t, nil, 30*time.Second)
	stopRelay(t, r)

	if err := server.RestoreSnapshot(); err != nil {
		t.Fatal(err)
	}
	o.db.Reset()
	var d []string
	if waiting > 0 {
		d = insertSingles(ctx, t, server.URL, o.name, waiting)
	}
	r = startRelayOn(t, server.URL, args...)
	hs := waitHeals(t, r, 1, time.Minute)
	if hs[0].rows != len(d) {
		t.Errorf("the heal published %d rows, want the restored outbox's %d", hs[0].rows, len(d))
	}
	c := insertSingles(ctx, t, server.URL, o.name, 20) // committed after the heal: the stream's
	all := append(append(append(append([]string(nil), a...), b...), d...), c...)
	msgs := consumeCommitted(t, topics, len(all), time.Minute)
	if n := countDuplicates(t, all, msgs); n != 0 {
		t.Errorf("%d events read twice at read_committed", n)
	}
	o.waitEmpty(t, nil, 30*time.Second)
	stopRelay(t, r)
}
