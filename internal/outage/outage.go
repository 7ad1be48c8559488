// Package outage tells an operator when requests to Kafka keep failing:
// one warning per outage, once failures have lasted a second, and one
// line when requests succeed again, saying how long it lasted. Every room
// that sends requests and retries them in silence (the writer's produce
// requests, the transactional producer's, the checkpoint's) reports each
// attempt to one Tracker, so that one outage is one pair of lines
// whichever request meets it.
package outage

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/outbox-cdc/outbox-cdc/internal/redact"
)

// Grace is how long requests must fail, with no success between, before
// the outage is worth a warning: a leader moving, a coordinator loading,
// or a topic just created fails an attempt or two and is not.
const Grace = time.Second

// maxErrLen bounds the error a warning quotes: the cause, not a dump.
const maxErrLen = 300

// A Tracker follows whether requests are failing. Any success ends an
// outage: a broker answering is what the operator waits for. Its methods
// may be called from any goroutine; a nil Tracker tracks nothing.
type Tracker struct {
	log   *slog.Logger
	now   func() time.Time
	grace time.Duration // how long failures last before a warning: Grace unless NewAfter said

	failing atomic.Bool // a failure since the last success: Succeeded takes the lock only then

	mu     sync.Mutex // guards the fields below
	since  time.Time  // the first failure since the last success
	what   string     // the request that failed last
	last   string     // and its error, short and redacted
	warned bool       // this outage was logged
}

// New returns a Tracker logging to log, warning of failures that have
// lasted Grace.
func New(log *slog.Logger) *Tracker {
	return NewAfter(log, Grace)
}

// NewAfter returns a Tracker logging to log that warns of failures once
// they have lasted grace instead of Grace: for a caller whose requests
// are retried on another scale (a test's, whose outages last a fraction
// of a second). A grace of zero or less is Grace.
func NewAfter(log *slog.Logger, grace time.Duration) *Tracker {
	if grace <= 0 {
		grace = Grace
	}
	return &Tracker{log: log, now: time.Now, grace: grace}
}

// Failed records a failed attempt of request what (its name, such as
// EndTxn(commit), or produce), with err. Once failures have lasted its grace
// with no success between, it logs one warning for the outage, naming
// what and err, and returns true.
func (t *Tracker) Failed(what string, err error) bool {
	if t == nil {
		return false
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		t.since = now
		t.failing.Store(true)
	}
	t.what, t.last = what, short(err)
	if t.warned || now.Sub(t.since) < t.grace {
		return false
	}
	t.warned = true
	t.log.Warn("kafka requests failing, retrying until they succeed", slog.String("request", t.what),
		slog.String("err", t.last), slog.Duration("for", now.Sub(t.since).Round(time.Millisecond)))
	return true
}

// Succeeded records a request answered: the outage, if any, is over. When
// it was logged, it logs how long it lasted and returns true.
func (t *Tracker) Succeeded() bool {
	if t == nil || !t.failing.Load() {
		return false
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	warned, since := t.warned, t.since
	t.since, t.warned = time.Time{}, false
	t.failing.Store(false)
	if !warned {
		return false
	}
	t.log.Info("kafka requests recovered", slog.String("request", t.what),
		slog.Duration("after", now.Sub(since).Round(time.Millisecond)))
	return true
}

// Failing reports, when requests have failed for at least d with no
// success since, since when, the request that failed last, and its error.
func (t *Tracker) Failing(d time.Duration) (since time.Time, what, last string, failing bool) {
	if t == nil || !t.failing.Load() {
		return time.Time{}, "", "", false
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() || now.Sub(t.since) < d {
		return time.Time{}, "", "", false
	}
	return t.since, t.what, t.last, true
}

// short is err's message for a log line: passwords blanked (an error may
// quote a URL), cut to maxErrLen bytes.
func short(err error) string {
	if err == nil {
		return ""
	}
	s := redact.String(err.Error())
	if len(s) <= maxErrLen {
		return s
	}
	cut := maxErrLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
