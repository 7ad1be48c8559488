package integration

import (
	"sync"
	"testing"
	"time"
)

// TestSlotHealAfterDropWhileStreaming drops the slot by hand while the
// relay streams under load (its walsender ended, the slot dropped before
// the relay is back): the relay heals once, with cause dropped, and
// streams on; every committed row arrives, the events read more than once
// are within the heal's rows, the table empties, and the counter counts
// the heal.
func TestSlotHealAfterDropWhileStreaming(t *testing.T) {
	slowFault(t) // make test-faults (and .ci/run) runs it: make test stays under 10 minutes
	o := newOutbox(t, "healdrop", defaultColumns)
	r := startRelay(t, o.args(healArgs...)...)
	prior := len(r.heals(t)) // a first start is not a loss; if it logs a heal, that one is not the drop's
	topics := []string{o.name + ".Order"}
	w := startRowWriter(o, func() string { return o.name }, 5*time.Millisecond)
	stop := w.stopOnce(t)

	waitFor(t, r, 30*time.Second, "the writer committed 200 rows", func() bool { return w.count() >= 200 })
	consume(t, topics, 100, time.Minute)
	dropped := time.Now()
	attempts := dropActiveSlot(t, o)
	atDrop := w.count()
	hs := waitHeals(t, r, prior+1, 90*time.Second)[prior:]
	healed := w.count()
	waitFor(t, r, 30*time.Second, "200 more rows committed after the heal", func() bool { return w.count() >= healed+200 })
	ids := stop()
	msgs := consume(t, topics, len(ids), 2*time.Minute)

	repeated := countDuplicates(t, ids, msgs)
	if len(hs) != 1 {
		t.Errorf("%d `%s` lines after one drop, want 1: %+v", len(hs), healEndMsg, hs)
	}
	rows := 0
	for _, h := range hs {
		rows += h.rows
		if h.cause != "dropped" || h.slot != o.name {
			t.Errorf("a heal of slot %q with cause %q, want slot %s and cause dropped (it was dropped while the relay streamed)", h.slot, h.cause, o.name)
		}
	}
	checkHealWarning(t, r, o.name, "dropped")
	if repeated > rows {
		t.Errorf("%d events read more than once, more than the %d rows the heal says it re-read", repeated, rows)
	}
	o.waitEmpty(t, nil, 30*time.Second)
	if len(hs) == 1 {
		checkHealMetrics(t, r, hs[0], dropped)
	}
	t.Logf("slot dropped (attempt %d) with %d rows committed; healed (%d rows re-read) with %d; %d rows in all, %d read more than once; %d heal(s) logged at the first start",
		attempts, atDrop, rows, healed, len(ids), repeated, prior)
	stopRelay(t, r)
}

// count is how many rows the writer has committed so far.
func (w *rowWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// stopOnce returns the writer's stop, safe to call more than once, and
// has the test's end call it: a test that fails midway leaves no writer
// behind.
func (w *rowWriter) stopOnce(t *testing.T) func() []string {
	var once sync.Once
	var ids []string
	stop := func() []string {
		once.Do(func() { ids = w.stop() })
		return ids
	}
	t.Cleanup(func() { stop() })
	return stop
}
