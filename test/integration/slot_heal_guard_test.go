package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// What a heal (--on-slot-lost heal) must not do: drop a slot that is not
// the relay's, heal silently over a slot someone else made, or forget a
// heal it has decided on.

// TestSlotHealSparesAnotherKindOfSlot: a physical slot (a standby's) under
// the relay's slot name has no confirmed position, which is no loss: the
// relay refuses it by name, as without heal, announces no heal, and the
// slot is still there, still physical.
func TestSlotHealSparesAnotherKindOfSlot(t *testing.T) {
	o := newOutbox(t, "healphys", defaultColumns)
	ctx := context.Background()
	if _, err := o.db.Exec(ctx, `SELECT pg_create_physical_replication_slot($1)`, o.name); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, o.args(append(healArgs, "--http-addr", "")...)...)
	if code == 0 || !strings.Contains(out, "not a logical pgoutput slot") || strings.Contains(out, healStartMsg) {
		t.Errorf("--on-slot-lost heal on a physical slot of its name: exit %d, want non-zero, %q and no heal:\n%s",
			code, "not a logical pgoutput slot", testkit.Tail(out, 10))
	}
	var kind string
	if err := o.db.QueryRow(ctx, `SELECT coalesce((SELECT slot_type FROM pg_replication_slots WHERE slot_name = $1), 'none')`, o.name).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	if kind != "physical" {
		t.Errorf("the physical slot %s is now %q: the heal dropped it", o.name, kind)
	}
}

// knownMissingMsg begins fail mode's warning for a recorded slot gone.
const knownMissingMsg = "replication slot missing though it existed here before"

// TestSlotRecordedInEitherMode: a relay with --on-slot-lost fail records
// its slot too. Dropped while that relay is stopped, the slot is created
// anew at its next start, as always, with one WARN naming it; dropped
// again, a relay started with heal recognizes it missing (it was never
// recorded by a heal-mode relay) and republishes what the outbox holds.
func TestSlotRecordedInEitherMode(t *testing.T) {
	slowFault(t) // make test-faults (and .ci/run) runs it: make test stays under 10 minutes
	t.Setenv("OUTBOX_TEST_DELIVERY", "at-least-once")
	o := newOutbox(t, "healknown", defaultColumns)
	failArgs := o.args("--cleanup", "delete-after-publish")
	topics := []string{o.name + ".order"}
	w, counters := newWritten(), map[string]int{}
	r := startRelay(t, failArgs...)
	insertRows(t, o, w, makeRows(40, 5, "order", counters), 10)
	consume(t, topics, len(w.committed), time.Minute)
	stopRelay(t, r)
	if n := query[int64](context.Background(), t, o.URL, `SELECT count(*) FROM public.outbox_cdc_heal WHERE slot = $1`, o.name); n != 1 {
		t.Fatalf("--on-slot-lost fail: %d rows recording slot %s in outbox_cdc_heal, want 1", n, o.name)
	}

	testkit.DropSlot(t, o.URL, o.name)
	r = startRelay(t, failArgs...)
	waitFor(t, r, 30*time.Second, "the warning that the recorded slot is gone", func() bool { return r.countLines(knownMissingMsg) > 0 })
	var warned bool
	for _, line := range strings.Split(r.LogText(), "\n") {
		if strings.Contains(line, knownMissingMsg) {
			rec := testkit.ParseLogLine(line)
			warned = rec["level"] == "WARN" && rec["slot"] == o.name && strings.Contains(rec["msg"], "--on-slot-lost heal")
		}
	}
	if !warned || r.countLines(knownMissingMsg) != 1 || r.countLines(healStartMsg) != 0 {
		t.Errorf("fail mode on a recorded slot gone: want one WARN %q naming slot %s and --on-slot-lost heal, no heal:\n%s",
			knownMissingMsg, o.name, testkit.Tail(r.LogText(), 20))
	}
	stopRelay(t, r)

	testkit.DropSlot(t, o.URL, o.name)
	insertRows(t, o, w, makeRows(20, 5, "order", counters), 5) // while no slot exists: only the heal publishes them
	left := len(o.tableIDs(t))
	r = startRelay(t, o.args(healArgs...)...)
	hs := waitHeals(t, r, 1, time.Minute)
	consume(t, topics, len(w.committed), time.Minute)
	if hs[0].cause != "missing" || hs[0].rows != left {
		t.Errorf("heal after fail mode: cause %q rows %d, want missing and the %d rows the table held", hs[0].cause, hs[0].rows, left)
	}
	stopRelay(t, r)
}

// TestSlotHealThatCannotRunDropsNothing: a heal whose order cannot follow
// commit order (no timestamp column, track_commit_timestamp off,
// --backfill-order auto) is refused at start, before the lost slot is
// dropped: the slot a relay with --on-slot-lost fail made and lost stays
// lost, not missing, so that a start with a workable order still heals
// it (cause wal_removed) and delivers every row committed meanwhile,
// instead of taking a missing slot for a first start.
func TestSlotHealThatCannotRunDropsNothing(t *testing.T) {
	slowFault(t) // make test-faults (and .ci/run) runs it: make test stays under 10 minutes
	t.Setenv("OUTBOX_TEST_DELIVERY", "at-least-once")
	server := startLossyPostgres(t)
	o := newOutboxOn(t, server.URL, "healorder")
	base := o.args("--column-timestamp", "", "--cleanup", "delete-after-publish")
	topics := []string{o.name + ".order"}
	w, counters := newWritten(), map[string]int{}
	r := startRelayOn(t, server.URL, base...) // --on-slot-lost fail
	insertRows(t, o, w, makeRows(60, 10, "order", counters), 10)
	consume(t, topics, len(w.committed), time.Minute)
	stopRelay(t, r)
	loseSlot(t, o, func() { insertRows(t, o, w, makeRows(10, 10, "order", counters), 5) })

	refused := append(without(append([]string(nil), base...), "--http-addr"), "--http-addr", "", "--on-slot-lost", "heal")
	code, out := runOnce(t, refused...)
	if code == 0 || !strings.Contains(out, "--backfill-order") || strings.Contains(out, healStartMsg) {
		t.Errorf("a heal that cannot choose an order: exit %d, want non-zero naming --backfill-order, no heal:\n%s", code, testkit.Tail(out, 10))
	}
	if s := slotWALStatus(t, o); s != "lost" {
		t.Fatalf("after the refused heal, slot %s has wal_status %q, want lost: it was touched", o.name, s)
	}

	r = startRelayOn(t, server.URL, append(base, "--on-slot-lost", "heal", "--backfill-order", "id")...)
	hs := waitHeals(t, r, 1, time.Minute)
	consume(t, topics, len(w.committed), time.Minute)
	checkWALRemovedCause(t, serverVersion(t, o), hs[0].cause)
	stopRelay(t, r)
}
