package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// live is what the current session shows to metrics and probes, readable
// from any goroutine. Between sessions it keeps the last confirmed position.
type live struct {
	track     atomic.Pointer[checkpoint.Tracker]
	position  atomic.Pointer[position] // the session's delivery's: it says what is confirmed
	stream    atomic.Pointer[replication.Stream]
	streaming atomic.Bool
	writer    atomic.Pointer[sink.Writer] // the session's
	// backfilling is set while --backfill-where's rows or a heal's are
	// published before streaming, and while waiting for another
	// instance's backfill or heal to end (their lock).
	backfilling atomic.Bool
	// standingBy is set while another process streams the slot.
	standingBy atomic.Bool
	// preparing is set while a round readies the next session (reprepare:
	// connecting, waiting for a heal's or a backfill's lock, healing):
	// the standby's poll is not watched meanwhile, since that work is not
	// a poll and can outlast the watchdog's interval as it should.
	preparing atomic.Bool
	last      atomic.Uint64 // confirmed position of the last session
	// polled is when the standby last polled the slot (a watchdog's
	// loop), and backfill the backfill's latest progress (the status).
	polled   beat
	backfill backfillShown
}

// position is how far a session's slot may be confirmed, readable from
// any goroutine (deliverer.position).
type position func() pglogrepl.LSN

func (l *live) begin(t *checkpoint.Tracker, s *replication.Stream, confirmed position) {
	l.track.Store(t)
	l.position.Store(&confirmed)
	l.stream.Store(s)
	l.streaming.Store(true)
	l.standingBy.Store(false)
}

func (l *live) end() {
	l.streaming.Store(false)
	l.track.Store(nil)
	if p := l.position.Swap(nil); p != nil {
		l.last.Store(uint64((*p)()))
	}
	l.stream.Store(nil)
}

func (l *live) inFlight() (int, int64) {
	if t := l.track.Load(); t != nil {
		return t.InFlight()
	}
	return 0, 0
}

func (l *live) confirmed() pglogrepl.LSN {
	if p := l.position.Load(); p != nil {
		return (*p)()
	}
	return pglogrepl.LSN(l.last.Load())
}

func (l *live) received() pglogrepl.LSN {
	if s := l.stream.Load(); s != nil {
		return s.Received()
	}
	return 0
}

// readiness answers /readyz: ready while a session streams the slot and the
// brokers answer a metadata request. The broker's answer is cached for a
// second, so that frequent probes do not each cost a round trip.
type readiness struct {
	r *Relay

	mu      sync.Mutex
	at      time.Time
	kafka   error
	checked bool
}

func (rd *readiness) check(ctx context.Context) error {
	if rd.r.live.backfilling.Load() {
		return errors.New("backfilling the rows of --backfill-where before streaming (progress in the log, outbox-cdc status and outbox_cdc_backfill_* metrics)")
	}
	if !rd.r.live.streaming.Load() {
		return errors.New("replication is not streaming (starting, reconnecting, or standing by for another instance)")
	}
	if w := rd.r.live.writer.Load(); w != nil {
		// Brokers that answer but do not acknowledge (fewer in-sync
		// replicas than min.insync.replicas, a leader gone), or in
		// exactly-once a transaction coordinator that does not answer:
		// not ready.
		if since, request, last, failing := w.Failing(5 * time.Second); failing {
			return fmt.Errorf("kafka: %s failing since %s, retrying: %s", request, since.UTC().Format(time.RFC3339), last)
		}
	}
	return rd.kafkaReachable(ctx)
}

// kafkaReachable says whether a broker answers a metadata request, asked
// at most once a second.
func (rd *readiness) kafkaReachable(ctx context.Context) error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if time.Since(rd.at) > time.Second {
		err := sink.Ping(ctx, rd.r.cfg.Kafka.Brokers, rd.r.security)
		if rd.checked && (err == nil) != (rd.kafka == nil) {
			if err != nil {
				rd.r.log.Warn("kafka unreachable (readiness probe)", slog.Any("err", err))
			} else {
				rd.r.log.Info("kafka reachable again (readiness probe)")
			}
		}
		rd.at, rd.kafka, rd.checked = time.Now(), err, true
	}
	if rd.kafka != nil {
		return fmt.Errorf("kafka: %w", rd.kafka)
	}
	return nil
}
