package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// How often Watch asks for a Report, the least time between two STATUS
// lines of one phase, and how long an EXTEND_TIMEOUT_USEC asks for (three
// refreshes: one lost message does not let the timeout pass).
const (
	Look    = 250 * time.Millisecond
	Refresh = 5 * time.Second
	extend  = 3 * Refresh
)

// A Sender sends one notification: Notifier, or a test's fake.
type Sender interface {
	Notify(state string) error
}

// A Report is the service's state, as Watch asks for it every Look.
type Report struct {
	// Ready: READY=1 is sent, once, the first time it is true.
	Ready bool
	// Stopping: STOPPING=1 is sent, once, the first time it is true.
	Stopping bool
	// Phase and Detail make the STATUS line, "Phase: Detail". A new phase
	// is sent at once; a new detail (counts, positions) at most every
	// Refresh, so that a status of moving numbers is not a message every
	// Look.
	Phase, Detail string
	// Extend asks the service manager to extend the timeout of its
	// current state (EXTEND_TIMEOUT_USEC), every Refresh while it is true:
	// a start-up that takes long and works (a backfill before streaming)
	// is not killed by TimeoutStartSec. Stop sending and the timeout
	// applies again.
	Extend bool
	// Loops are the loops that must make progress in this state.
	Loops []Loop
}

// A Loop is a loop the service needs to come round: when it last did,
// and how long it sleeps between rounds on purpose (a poll's period).
type Loop struct {
	Name  string
	At    time.Time
	Sleep time.Duration
}

// Stalled returns the first loop that has not come round for longer than
// interval plus its own sleep, and for how long.
func Stalled(now time.Time, interval time.Duration, loops []Loop) (Loop, time.Duration, bool) {
	for _, l := range loops {
		if since := now.Sub(l.At); since > interval+l.Sleep {
			return l, since, true
		}
	}
	return Loop{}, 0, false
}

// Watch keeps the service manager told what a service is doing.
type Watch struct {
	Notifier Sender
	// Watchdog is the watchdog interval (Watchdog's; zero: no pings).
	// WATCHDOG=1 is sent every half of it, as sd_watchdog_enabled(3)
	// recommends, only while no loop of the latest Report is Stalled: a
	// service whose loop hangs stops pinging, and the service manager
	// restarts it once Watchdog passes without one. The status then says
	// which loop stalled.
	Watchdog time.Duration
	Report   func(now time.Time) Report
	// Wake, when it closes, makes Run look at once rather than at the
	// next Look: the service's stop begins (its context's Done).
	Wake   <-chan struct{}
	Logger *slog.Logger
}

// Run reports until ctx ends, and looks a last time then, so that a stop
// quicker than a Look is still told. A notification that fails is logged
// (a warning the first time, then at debug level) and does not stop it.
func (w Watch) Run(ctx context.Context) {
	s := watchState{w: w}
	look := time.NewTicker(Look)
	defer look.Stop()
	var pings <-chan time.Time
	if w.Watchdog > 0 {
		ping := time.NewTicker(w.Watchdog / 2)
		defer ping.Stop()
		pings = ping.C
	}
	s.look(time.Now())
	s.ping(time.Now())
	wake := w.Wake
	for {
		select {
		case <-ctx.Done():
			s.look(time.Now())
			return
		case <-wake:
			wake = nil
			s.look(time.Now())
		case now := <-look.C:
			s.look(now)
		case now := <-pings:
			s.ping(now)
		}
	}
}

// watchState is what Run has told, owned by its goroutine.
type watchState struct {
	w               Watch
	ready, stopping bool
	phase, status   string
	statusAt        time.Time
	extendAt        time.Time
	stalled         string // the STATUS of a stall, while pings are withheld
	failed          bool   // a notification failed: later failures are logged at debug level
}

func (s *watchState) look(now time.Time) { s.tell(now, s.w.Report(now)) }

// tell sends what r changes.
func (s *watchState) tell(now time.Time, r Report) {
	var msg []string
	if r.Ready && !s.ready {
		s.ready = true
		msg = append(msg, "READY=1")
	}
	if r.Stopping && !s.stopping {
		s.stopping = true
		msg = append(msg, "STOPPING=1")
	}
	status, phase := oneLine(r.Phase), r.Phase
	if r.Detail != "" {
		status += ": " + oneLine(r.Detail)
	}
	if s.stalled != "" {
		status, phase = s.stalled, "stalled" // a stall is a phase: its end is told at once
	}
	if status != s.status && (len(msg) > 0 || phase != s.phase || now.Sub(s.statusAt) >= Refresh) {
		s.phase, s.status, s.statusAt = phase, status, now
		msg = append(msg, "STATUS="+status)
	}
	if r.Extend && now.Sub(s.extendAt) >= Refresh {
		s.extendAt = now
		msg = append(msg, fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", extend.Microseconds()))
	}
	if len(msg) > 0 {
		s.send(strings.Join(msg, "\n"))
	}
}

func (s *watchState) ping(now time.Time) {
	if s.w.Watchdog <= 0 {
		return
	}
	r := s.w.Report(now)
	l, since, stalled := Stalled(now, s.w.Watchdog, r.Loops)
	s.stalled = ""
	if stalled {
		s.stalled = fmt.Sprintf("stalled: %s has not come round for %s; watchdog pings withheld", l.Name, since.Round(time.Second))
	}
	s.tell(now, r)
	if !stalled {
		s.send("WATCHDOG=1")
	}
}

func (s *watchState) send(state string) {
	err := s.w.Notifier.Notify(state)
	if err == nil || s.w.Logger == nil {
		return
	}
	level := slog.LevelWarn
	if s.failed {
		level = slog.LevelDebug
	}
	s.failed = true
	s.w.Logger.Log(context.Background(), level, "notifying the service manager failed", slog.Any("err", err))
}

// oneLine keeps a status on one line: a newline would end the assignment.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
