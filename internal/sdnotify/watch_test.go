package sdnotify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Every test of Watch runs in a synctest bubble: time is fake, so that a
// minute of watching takes none, and messages fall at exact instants.

// sent is one notification, with when it was sent since the watch began.
type sent struct {
	at    time.Duration
	state string
}

// recorder is a Sender that keeps what it is sent.
type recorder struct {
	begun time.Time
	fail  error

	mu   sync.Mutex
	sent []sent
}

func (r *recorder) Notify(state string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sent{time.Since(r.begun), state})
	return r.fail
}

// with returns the notifications holding the assignment kv (KEY=VALUE, or
// KEY= for any value), in order.
func (r *recorder) with(kv string) []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sent
	for _, s := range r.sent {
		for _, line := range strings.Split(s.state, "\n") {
			if line == kv || strings.HasSuffix(kv, "=") && strings.HasPrefix(line, kv) {
				out = append(out, s)
			}
		}
	}
	return out
}

// state is a Report the test changes while the watch runs.
type state struct {
	mu sync.Mutex
	r  Report
}

func (s *state) report(time.Time) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.r
	r.Loops = append([]Loop(nil), s.r.Loops...)
	return r
}

func (s *state) set(f func(*Report)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.r)
}

// watch runs a Watch with watchdog on st until the test's function
// returns, and returns what it was sent.
func watch(t *testing.T, watchdog time.Duration, st *state) *recorder {
	rec := &recorder{begun: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch{Notifier: rec, Watchdog: watchdog, Report: st.report}.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return rec
}

// ats returns when each notification was sent.
func ats(ss []sent) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.at
	}
	return out
}

// TestWatchdogPingsWhileLoopsComeRound: WATCHDOG=1 every half interval
// while the loop comes round; none once it has not for longer than the
// interval, and a status naming it; pings again, and the status of the
// phase, once it comes round again.
func TestWatchdogPingsWhileLoopsComeRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Second
		st := &state{r: Report{Ready: true, Phase: "streaming", Detail: "slot s"}}
		loop := func() { // the loop comes round every 20 ms until frozen
			st.set(func(r *Report) { r.Loops = []Loop{{Name: "the receive loop", At: time.Now()}} })
		}
		loop()
		rec := watch(t, interval, st)
		coming := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
				loop()
			}
		}
		begun := time.Now()
		coming(30*time.Second + 10*time.Millisecond) // not at a ping's instant
		pings := ats(rec.with("WATCHDOG=1"))
		if want := []time.Duration{0, 5 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second, 25 * time.Second, 30 * time.Second}; !equal(pings, want) {
			t.Fatalf("pings at %v while the loop comes round, want %v", pings, want)
		}
		time.Sleep(time.Until(begun.Add(60*time.Second + 10*time.Millisecond))) // frozen from 30.02 s
		pings = ats(rec.with("WATCHDOG=1"))
		// At 40 s it has not come round for 9.98 s: still pinged. At 45 s
		// it is 14.98 s: stalled.
		if want := []time.Duration{35 * time.Second, 40 * time.Second}; !equal(pings[7:], want) {
			t.Errorf("pings after the loop froze at 30 s: %v, want %v and none after", pings[7:], want)
		}
		var stalls []string
		for _, s := range rec.with("STATUS=") {
			if strings.Contains(s.state, "stalled") {
				stalls = append(stalls, fmt.Sprintf("%s %s", s.at, s.state))
			}
		}
		if len(stalls) == 0 || stalls[0] != "45s STATUS=stalled: the receive loop has not come round for 15s; watchdog pings withheld" {
			t.Errorf("statuses of the stall: %q, want the first at 45s naming the loop", stalls)
		}
		coming(10 * time.Second) // from 60 s
		pings = ats(rec.with("WATCHDOG=1"))
		if want := []time.Duration{65 * time.Second, 70 * time.Second}; !equal(pings[9:], want) {
			t.Errorf("pings once the loop came round again: %v, want %v", pings[9:], want)
		}
		statuses := rec.with("STATUS=")
		if last := statuses[len(statuses)-1]; last.at != 65*time.Second || last.state != "STATUS=streaming: slot s" {
			t.Errorf("last status %q at %s, want the phase's again at 65s", last.state, last.at)
		}
	})
}

func equal(a, b []time.Duration) bool {
	return len(a) == len(b) && string(fmtDurations(a)) == string(fmtDurations(b))
}

func fmtDurations(ds []time.Duration) []byte {
	var b bytes.Buffer
	for _, d := range ds {
		b.WriteString(d.String() + " ")
	}
	return b.Bytes()
}

// TestStalledAllowsALoopItsSleep: a poll that sleeps between rounds is
// stalled only past the interval and its sleep.
func TestStalledAllowsALoopItsSleep(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		loops   []Loop
		stalled string
	}{
		{"none", nil, ""},
		{"fresh", []Loop{{Name: "a", At: now.Add(-time.Second)}}, ""},
		{"at the interval", []Loop{{Name: "a", At: now.Add(-10 * time.Second)}}, ""},
		{"past the interval", []Loop{{Name: "a", At: now.Add(-10*time.Second - 1)}}, "a"},
		{"past the interval, within its sleep", []Loop{{Name: "poll", At: now.Add(-11 * time.Second), Sleep: 2 * time.Second}}, ""},
		{"past the interval and its sleep", []Loop{{Name: "poll", At: now.Add(-13 * time.Second), Sleep: 2 * time.Second}}, "poll"},
		{"one of two", []Loop{{Name: "a", At: now}, {Name: "b", At: now.Add(-time.Minute)}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, stalled := Stalled(now, 10*time.Second, tt.loops)
			if stalled != (tt.stalled != "") || l.Name != tt.stalled {
				t.Errorf("Stalled = %q, %v; want %q", l.Name, stalled, tt.stalled)
			}
		})
	}
}

// TestWatchTellsStates: READY=1 once, with the status, when the service
// becomes ready; STOPPING=1 once; a new phase at once; a new detail of
// the same phase at most every Refresh; no pings without a watchdog;
// EXTEND_TIMEOUT_USEC every Refresh while asked for.
func TestWatchTellsStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &state{r: Report{Phase: "starting", Extend: true}}
		rec := watch(t, 0, st)
		time.Sleep(12100 * time.Millisecond) // between two looks
		st.set(func(r *Report) { *r = Report{Ready: true, Phase: "streaming", Detail: "0"} })
		for i := range 60 { // a detail that changes every 100 ms for 6 s
			time.Sleep(100 * time.Millisecond)
			st.set(func(r *Report) { r.Detail = fmt.Sprint(i + 1) })
		}
		st.set(func(r *Report) { r.Ready, r.Phase = false, "reconnecting" })
		time.Sleep(time.Second)
		st.set(func(r *Report) { r.Ready, r.Stopping, r.Phase = true, true, "draining" })
		time.Sleep(time.Second)

		if got := ats(rec.with("EXTEND_TIMEOUT_USEC=15000000")); !equal(got, []time.Duration{0, 5 * time.Second, 10 * time.Second}) {
			t.Errorf("EXTEND_TIMEOUT_USEC at %v, want every 5s while asked for", got)
		}
		var got []string
		for _, s := range rec.with("STATUS=") {
			got = append(got, fmt.Sprintf("%s %q", s.at, s.state))
		}
		want := []string{
			`0s "STATUS=starting\nEXTEND_TIMEOUT_USEC=15000000"`,
			`12.25s "READY=1\nSTATUS=streaming: 1"`,
			`17.25s "STATUS=streaming: 51"`, // 5 s later, not at each of the 50 changes between
			`18.25s "STATUS=reconnecting: 60"`,
			`19.25s "STOPPING=1\nSTATUS=draining: 60"`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if n := len(rec.with("READY=1")); n != 1 {
			t.Errorf("READY=1 sent %d times, want once", n)
		}
		if n := len(rec.with("WATCHDOG=1")); n != 0 {
			t.Errorf("%d pings without a watchdog", n)
		}
	})
}

// TestWatchTellsAStopAtOnce: a stop is told when Wake closes, not at the
// next look, and told even when the watch ends at once after it.
func TestWatchTellsAStopAtOnce(t *testing.T) {
	for _, end := range []bool{false, true} {
		t.Run(fmt.Sprintf("the watch ends at once: %v", end), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &state{r: Report{Ready: true, Phase: "streaming"}}
				rec := &recorder{begun: time.Now()}
				stopping, wake := context.WithCancel(context.Background())
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					Watch{Notifier: rec, Report: st.report, Wake: stopping.Done()}.Run(ctx)
				}()
				time.Sleep(100 * time.Millisecond) // between two looks
				st.set(func(r *Report) { r.Stopping, r.Phase = true, "draining" })
				wake()
				if end {
					cancel()
				}
				synctest.Wait()
				got := rec.with("STOPPING=1")
				if len(got) != 1 || got[0].at != 100*time.Millisecond {
					t.Errorf("STOPPING=1 sent %v, want once at 100ms", got)
				}
				cancel()
				<-done
			})
		})
	}
}

// TestWatchLogsAFailureOnce: a notification that fails is a warning the
// first time, then debug lines.
func TestWatchLogsAFailureOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		rec := &recorder{begun: time.Now(), fail: errors.New("connection refused")}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Watch{Notifier: rec, Watchdog: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Report: func(time.Time) Report { return Report{Phase: "starting"} }}.Run(ctx)
		}()
		time.Sleep(3 * time.Second)
		cancel()
		<-done
		if w, d := strings.Count(logs.String(), "level=WARN"), strings.Count(logs.String(), "level=DEBUG"); w != 1 || d < 5 {
			t.Errorf("%d warnings and %d debug lines, want 1 and the rest:\n%s", w, d, logs.String())
		}
	})
}
