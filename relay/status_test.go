package relay

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/sdnotify"
)

// notifyConfig is a configuration New accepts without a server.
func notifyConfig() Config {
	cfg := Default()
	cfg.PostgresURL, cfg.Kafka.Brokers = "postgres://u@127.0.0.1:1/db", []string{"127.0.0.1:1"}
	cfg.Slot.Name = "outbox_cdc"
	return cfg
}

// notes is a Notifier that keeps what it is told, with when.
type notes struct {
	begun time.Time
	mu    sync.Mutex
	got   []string // "at state"
}

func (n *notes) Notify(state string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, time.Since(n.begun).String()+" "+state)
	return nil
}

func (n *notes) with(prefix string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, g := range n.got {
		if strings.Contains(g, prefix) {
			out = append(out, g)
		}
	}
	return out
}

// TestReportSaysWhatTheRelayDoes: the phase, readiness and the loops the
// watchdog watches follow the relay's state: starting (nothing watched),
// backfilling (the start-up timeout extended), standing by (ready; its
// poll watched, allowed its own sleep), streaming (ready), draining.
func TestReportSaysWhatTheRelayDoes(t *testing.T) {
	r, err := New(notifyConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	report := r.reporter(ctx)
	check := func(step string, want sdnotify.Report, detail string, loops ...string) {
		t.Helper()
		got := report(time.Now())
		var names []string
		for _, l := range got.Loops {
			names = append(names, l.Name)
		}
		if got.Ready != want.Ready || got.Stopping != want.Stopping || got.Extend != want.Extend || got.Phase != want.Phase ||
			!strings.Contains(got.Detail, detail) || strings.Join(names, ",") != strings.Join(loops, ",") {
			t.Errorf("%s: %+v, want %+v with detail %q and loops %q", step, got, want, detail, loops)
		}
	}
	check("starting", sdnotify.Report{Phase: "starting"}, "slot outbox_cdc")

	r.live.backfilling.Store(true)
	r.backfillProgress("public.outbox", 1000, 250)
	check("backfilling", sdnotify.Report{Phase: "backfilling", Extend: true}, "table public.outbox, 250 of 1000 rows")
	r.live.backfilling.Store(false)

	r.live.polled.now()
	r.live.standingBy.Store(true)
	check("standing by", sdnotify.Report{Ready: true, Phase: "standing by"}, "slot outbox_cdc is held by another instance", "the standby's poll of the slot")
	if got := report(time.Now()).Loops[0].Sleep; got != standbyPoll {
		t.Errorf("the standby's poll is allowed a sleep of %s, want standbyPoll", got)
	}

	r.live.standingBy.Store(false)
	r.live.streaming.Store(true)
	check("streaming", sdnotify.Report{Ready: true, Phase: "streaming"}, "slot outbox_cdc, received 0/0, confirmed 0/0, 0 events/s")

	r.live.streaming.Store(false)
	check("reconnecting, once streamed", sdnotify.Report{Phase: "reconnecting"}, "slot outbox_cdc")

	cancel()
	check("draining", sdnotify.Report{Phase: "draining", Stopping: true}, "0 events in flight")
}

// TestStandbyWatchdog: a standby pings while its poll of the slot comes
// round; once the poll stalls past the watchdog interval and the poll's
// own sleep, the pings stop and the status says which loop stalled.
func TestStandbyWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, n, cancel, stop := standingByWatched(t)
		for range 10 { // a poll every 1.5 s for 15 s
			time.Sleep(1500 * time.Millisecond)
			r.live.polled.now()
		}
		pinged := len(n.with("WATCHDOG=1"))
		if want := 8; pinged != want { // at 0, 2, 4, …, 14 s
			t.Errorf("%d pings in 15 s of polls, want %d", pinged, want)
		}
		time.Sleep(15 * time.Second) // the poll stalls from 15 s: 4 s + its 2 s sleep
		if got, want := n.with("WATCHDOG=1")[pinged:], []string{"16s WATCHDOG=1", "18s WATCHDOG=1", "20s WATCHDOG=1"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("pings once the poll stalled at 15 s: %q, want %q and none after", got, want)
		}
		if s := n.with("stalled"); len(s) == 0 || !strings.HasPrefix(s[0], "22s STATUS=stalled: the standby's poll of the slot has not come round for 7s") {
			t.Errorf("statuses of the stall: %q", s)
		}
		if ready := n.with("READY=1"); len(ready) != 1 || !strings.Contains(ready[0], "STATUS=standing by: ") {
			t.Errorf("READY=1: %q, want once, standing by", ready)
		}
		cancel()
		time.Sleep(time.Second)
		stop()
		if stopping := n.with("STOPPING=1"); len(stopping) != 1 {
			t.Errorf("STOPPING=1: %q, want once when Run's context ended", stopping)
		}
	})
}

// TestStandbyHealingIsNotAStall: a standby whose next round heals the slot,
// or waits for another instance's heal or backfill (backfilling), stops
// polling meanwhile; that is no stall, and the pings go on.
func TestStandbyHealingIsNotAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, n, cancel, stop := standingByWatched(t)
		time.Sleep(3 * time.Second)
		r.live.backfilling.Store(true) // the round heals, for 30 s
		pinged := len(n.with("WATCHDOG=1"))
		time.Sleep(30 * time.Second)
		if got := len(n.with("WATCHDOG=1")) - pinged; got < 14 {
			t.Errorf("%d pings in 30 s of a standby's heal, want one every 2 s: %q", got, n.with("stalled"))
		}
		cancel()
		time.Sleep(time.Second)
		stop()
	})
}

// standingByWatched is a relay standing by (its poll just came round),
// told to a notes notifier with a 4 s watchdog; cancel starts its stop,
// stop waits for the notifier's watch to end.
func standingByWatched(t *testing.T) (r *Relay, n *notes, cancel context.CancelFunc, stop func()) {
	t.Helper()
	n = &notes{begun: time.Now()}
	r, err := New(notifyConfig(), WithNotifier(n, 4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop = r.tell(ctx)
	r.live.polled.now()
	r.live.standingBy.Store(true)
	return r, n, cancel, stop
}
