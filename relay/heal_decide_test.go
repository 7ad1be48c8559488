package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// TestHealDecision: when --on-slot-lost heal heals, and for what cause: an
// invalidated slot always; a missing one after streaming (dropped), or at
// start where this database knew the slot (missing); never on a first
// start, which is recorded instead; and a heal cut short is resumed under
// its first cause.
func TestHealDecision(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	before := start.Add(-time.Hour)
	unfinished := backfill.HealRecord{Cause: "wal_removed", Started: &start, Finished: &before}
	finished := backfill.HealRecord{Cause: "wal_removed", Started: &before, Finished: &start}
	cases := []struct {
		name   string
		facts  healFacts
		cause  slot.Loss
		record bool
	}{
		{"first start: no slot, never known", healFacts{loss: slot.LossMissing}, slot.LossNone, true},
		{"healthy, not yet recorded (an upgrade)", healFacts{loss: slot.LossNone}, slot.LossNone, true},
		{"healthy and recorded", healFacts{loss: slot.LossNone, known: true, record: finished}, slot.LossNone, false},
		{"missing at start, recorded before", healFacts{loss: slot.LossMissing, known: true}, slot.LossMissing, false},
		{"missing at start, a backfill of it recorded", healFacts{loss: slot.LossMissing, backfilled: true}, slot.LossMissing, false},
		{"missing after a session", healFacts{loss: slot.LossMissing, afterSession: true, known: true}, slot.LossDropped, false},
		{"missing after a session, never recorded", healFacts{loss: slot.LossMissing, afterSession: true}, slot.LossDropped, false},
		{"missing after a session, on a promoted standby", healFacts{loss: slot.LossMissing, afterSession: true, known: true, moved: true}, slot.LossMissing, false},
		{"missing after a session, on a promoted standby the record had not reached", healFacts{loss: slot.LossMissing, afterSession: true, moved: true}, slot.LossMissing, false},
		{"invalidated by max_slot_wal_keep_size", healFacts{loss: slot.LossWALRemoved, known: true}, slot.LossWALRemoved, false},
		{"invalidated while idle, unrecorded", healFacts{loss: slot.LossIdleTimeout}, slot.LossIdleTimeout, false},
		{"a heal cut short before the slot was made", healFacts{loss: slot.LossMissing, known: true, record: unfinished}, slot.LossWALRemoved, false},
		{"a heal cut short on the new slot, or under way elsewhere", healFacts{loss: slot.LossNone, known: true, record: unfinished}, slot.LossWALRemoved, false},
		{"a backfill cut short, no heal under way", healFacts{loss: slot.LossNone, known: true, record: finished}, slot.LossNone, false},
	}
	for _, c := range cases {
		cause, record := decideHeal(c.facts)
		if cause != c.cause || record != c.record {
			t.Errorf("%s: cause %q record %v, want %q %v", c.name, cause, record, c.cause, c.record)
		}
	}
}

// TestHealSpecs: a heal reads every table with the predicate of its
// unsettled rows, narrowed by the table's --where, in its --backfill-order,
// whatever its --backfill-where.
func TestHealSpecs(t *testing.T) {
	cfg := Default()
	cfg.Cleanup, cfg.OnSlotLost = "delete-after-publish", SlotLostHeal
	a, b := cfg.Table("public.a"), cfg.Table("public.b")
	a.Backfill.Where, a.Backfill.Order, b.Where = "sent IS NULL", backfill.OrderID, "region = 'eu'"
	cfg.Tables = []Table{a, b}
	specs, err := healSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []backfill.Spec{{Where: "true", Order: backfill.OrderID}, {Where: "true", RowFilter: "region = 'eu'", Order: backfill.OrderAuto}}
	for i := range want {
		if specs[i] != want[i] {
			t.Errorf("table %d: %+v, want %+v", i, specs[i], want[i])
		}
	}
}

// TestServerMovedOnce: a failover is a move once: the decision that finds
// the server moved takes it as the one to compare with, so a drop after
// it, on the same server, is a drop and not a second move.
func TestServerMovedOnce(t *testing.T) {
	first := replication.System{ID: "7001", Timeline: 1}
	promoted := replication.System{ID: "7001", Timeline: 2}
	restored := replication.System{ID: "7002", Timeline: 1}
	var served *replication.System
	for i, step := range []struct {
		name  string
		found replication.System
		moved bool
	}{
		{"the first decision", first, false},
		{"the same server", first, false},
		{"after a promotion", promoted, true},
		{"the promoted server again", promoted, false},
		{"after a restore elsewhere", restored, true},
		{"the restored server again", restored, false},
	} {
		var moved bool
		moved, served = movedFrom(served, step.found)
		if moved != step.moved {
			t.Errorf("decision %d, %s: moved %v, want %v", i, step.name, moved, step.moved)
		}
	}
}

// TestHeldLostSlotIsWaitedFor: a lost slot that a process still holds
// when a heal would drop it (slot.ErrLostSlotHeld) does not end the relay
// at start: it stands by, like an instance whose slot another streams,
// and heals once the slot is let go.
func TestHeldLostSlotIsWaitedFor(t *testing.T) {
	held := fmt.Errorf("prepare the heal: %w", fmt.Errorf("%w: slot %q is invalidated and a process still holds it", slot.ErrLostSlotHeld, "s"))
	err := heldAsActive(held)
	if fatalAtStart(err) {
		t.Errorf("at start, %v ends the relay; want it to stand by", err)
	}
	if !errors.Is(err, replication.ErrSlotActive) {
		t.Errorf("%v is not replication.ErrSlotActive: the retry loop would not stand by for it", err)
	}
	if other := errors.New("connect to postgres: refused"); !fatalAtStart(heldAsActive(other)) {
		t.Errorf("at start, %v does not end the relay", other)
	}
}

// TestHealEndReported: a heal is counted and logged (`slot healed`, with
// the cause, rows and duration recorded) by whichever instance records
// its end: a heal cut short after its rows were published (a SIGTERM, a
// crash) is ended by the next start or by another instance, and counted
// there; one whose end another instance recorded is not counted twice.
func TestHealEndReported(t *testing.T) {
	started := time.Unix(1_700_000_000, 0)
	finished := started.Add(1500 * time.Millisecond)
	rec := backfill.HealRecord{Slot: "outbox_cdc", Cause: "wal_removed", Started: &started, Finished: &finished, Rows: 42}
	for _, c := range []struct {
		name  string
		ended bool
		lines int
	}{
		{"the heal's end recorded here", true, 1},
		{"its end recorded by another instance", false, 0},
	} {
		var logs bytes.Buffer
		reg := prometheus.NewRegistry()
		r, err := New(notifyConfig(), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), WithRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		r.healEnded(rec, c.ended) // the heal may have run elsewhere, or before a restart
		lines := strings.Count(logs.String(), `"msg":"slot healed"`)
		heals := gathered(t, reg, "outbox_cdc_slot_heals_total")
		if lines != c.lines || int(heals) != c.lines {
			t.Errorf("%s: %d `slot healed` lines, %v heals counted, want %d", c.name, lines, heals, c.lines)
		}
		if c.lines == 1 && (!strings.Contains(logs.String(), `"rows":42`) || !strings.Contains(logs.String(), `"took":1500000000`) ||
			!strings.Contains(logs.String(), `"cause":"wal_removed"`)) {
			t.Errorf("%s: the line does not say the recorded cause, rows and duration: %s", c.name, logs.String())
		}
	}
}

// gathered is the sum of family's series in reg.
func gathered(t *testing.T, reg *prometheus.Registry, family string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestSlotRecordedOnceItExists: a slot is recorded as known here only once
// the usual preparation has made it: a creation that fails (no free slot,
// a wrong grant) leaves nothing recorded, so the next start is a first
// start again and not a heal of every row in the outbox.
func TestSlotRecordedOnceItExists(t *testing.T) {
	for _, c := range []struct {
		name     string
		usualErr error
		want     []string
	}{
		{"the slot is created", nil, []string{"usual", "record"}},
		{"its creation fails", errors.New("create replication slot: all replication slots are in use"), []string{"usual"}},
	} {
		var did []string
		p := preparation{
			usual: func(context.Context) (pglogrepl.LSN, error) { did = append(did, "usual"); return 1, c.usualErr },
			heal: func(context.Context, slot.Loss) (pglogrepl.LSN, error) {
				did = append(did, "heal")
				return 1, nil
			},
			record: func(context.Context) error { did = append(did, "record"); return nil },
		}
		_, err := p.follow(context.Background(), slot.LossNone, true)
		if !errors.Is(err, c.usualErr) || !slices.Equal(did, c.want) {
			t.Errorf("%s: did %v (err %v), want %v (err %v)", c.name, did, err, c.want, c.usualErr)
		}
	}
}

// TestHealFindsTheSlotMade: a heal decided on, that finds under the lock a
// slot it did not create and nothing due, streams it as healed only when
// the heal record says a heal ran since the decision (another instance
// healed it) or was under way at it (this heal, cut short once its rows
// were published). A slot made meanwhile by anything else (a relay with
// --on-slot-lost fail, setup, an operator) is healed over, not streamed
// as if nothing were lost.
func TestHealFindsTheSlotMade(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	done := backfill.HealRecord{Heals: 1, Cause: "wal_removed", Started: &t0, Finished: &t1}
	cutShort := backfill.HealRecord{Heals: 1, Cause: "dropped", Started: &t1, Finished: &t1}
	cutShort.Finished = &t0 // before its start: unfinished
	healedSince := backfill.HealRecord{Heals: 2, Cause: "missing", Started: &t1, Finished: &t2}
	for _, c := range []struct {
		name         string
		created, due bool
		before, now  backfill.HealRecord
		want         healOutcome
	}{
		{"it created the slot", true, false, done, done, healFresh},
		{"a heal cut short, tables due", false, true, cutShort, cutShort, healResume},
		{"another instance healed it meanwhile", false, false, done, healedSince, healDone},
		{"another instance healed it, first heal here", false, false, backfill.HealRecord{}, healedSince, healDone},
		{"this heal, cut short after its rows", false, false, cutShort, cutShort, healDone},
		{"a slot someone else made, no heal since", false, false, done, done, healOver},
		{"a slot someone else made, never healed", false, false, backfill.HealRecord{}, backfill.HealRecord{}, healOver},
	} {
		if got := judgeHeal(c.created, c.due, c.before, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
