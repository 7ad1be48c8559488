package sink

import (
	"fmt"
	"log/slog"
	"time"
)

// produceFailed is called on each failed produce attempt. It is turned
// into one warning per outage, once failures have lasted a second: a leader
// moving, or a topic just created, fails one attempt and is not worth a
// warning.
func (w *Writer) produceFailed(err error, msg string, args ...any) {
	w.cfg.Observer.ProduceFailed(errorKind(err))
	text := fmt.Sprintf(msg, args...)
	w.lastFailure.Store(&text)
	now := time.Now().UnixNano()
	w.failingSince.CompareAndSwap(0, now)
	if now-w.failingSince.Load() < int64(time.Second) {
		w.log.Debug("kafka produce failed, retrying", slog.String("err", fmt.Sprintf(msg, args...)))
		return
	}
	if w.down.CompareAndSwap(false, true) {
		w.log.Warn("kafka produce failing, retrying until it succeeds", slog.String("err", fmt.Sprintf(msg, args...)))
	}
}

// Failing reports, when produce requests have failed for at least d with
// no success since, since when and the last failure.
func (w *Writer) Failing(d time.Duration) (since time.Time, last string, failing bool) {
	ns := w.failingSince.Load()
	if ns == 0 || time.Since(time.Unix(0, ns)) < d {
		return time.Time{}, "", false
	}
	if p := w.lastFailure.Load(); p != nil {
		last = *p
	}
	return time.Unix(0, ns), last, true
}

func (w *Writer) up() {
	if w.failingSince.Load() != 0 {
		w.failingSince.Store(0)
	}
	if w.down.Load() && w.down.CompareAndSwap(true, false) {
		w.log.Info("kafka produce succeeding again")
	}
}
