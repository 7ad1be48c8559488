package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/delivery"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// session is one replication connection and one Kafka writer, from start to
// the first failure or to ctx's end. It reports whether streaming began.
func (r *Relay) session(ctx context.Context, start pglogrepl.LSN) (bool, error) {
	cfg := r.cfg
	if start == 0 {
		return false, errors.New("slot position unknown")
	}
	target, err := r.withOIDs(ctx)
	if err != nil {
		return false, err
	}
	track := checkpoint.New(start, cfg.Stream.MaxInFlight, cfg.Stream.MaxInFlightBytes)
	// After a stall, requests wait until the stream has had the time to
	// find its connection gone (see stallGuard).
	guard := newStallGuard()
	guardCtx, stopGuard := context.WithCancel(context.WithoutCancel(ctx))
	var guarding sync.WaitGroup
	guarding.Go(func() { guard.run(guardCtx) })
	defer guarding.Wait()
	defer stopGuard()
	d := r.delivery.Session(track, start)
	stream, err := replication.Connect(ctx, replication.StreamConfig{
		URL: cfg.PostgresURL, Slot: cfg.Slot.Name, Publication: cfg.Slot.Publication, StatusInterval: cfg.Stream.StatusInterval,
		ConfirmEvery: cfg.Stream.ConfirmInterval, ReceiveTimeout: cfg.Stream.ReceiveTimeout, Logger: r.log,
		ReadPacing: cfg.Stream.ReadPacing,
	}, d)
	if err != nil {
		return false, err
	}
	var pub *publisher
	err = d.Open(ctx, stream, start, func(w delivery.Writes) (delivery.Publisher, error) {
		var err error
		if pub, err = r.newPublisher(ctx, track, guard.hold, w); err != nil {
			return delivery.Publisher{}, err
		}
		return pub.delivered(), nil
	})
	if err != nil {
		return false, errors.Join(err, stream.Close(context.Background()))
	}

	r.live.begin(track, stream, d.Position)
	r.live.writer.Store(pub.writer)
	defer r.live.writer.Store(nil)
	defer r.live.end()
	runErr, lost := r.read(ctx, target, track, pub, stream, d)
	err = r.drain(ctx, track, pub, stream, d, runErr, lost)
	return true, d.TimedOut(err)
}

// read hands the stream's messages to a pipeline until ctx ends, the
// stream fails, a publish fails, or a table leaves the publication. lost
// says the stream ended of itself: the replication connection is gone (or
// the server ended it), so nothing more can be confirmed on it, and the
// slot may be another instance's already.
func (r *Relay) read(ctx context.Context, target slot.Target, track *checkpoint.Tracker, pub *publisher, stream *replication.Stream, d delivery.Session) (runErr error, lost bool) {
	cfg, log := r.cfg, r.log
	dec := decode.New(target.Tables...)
	dec.DecodeMessages(cfg.Messages.Prefix)
	p := &pipeline{dec: dec, track: track, pub: pub.writer, clean: pub.cleaner, gate: d}
	readCtx, stopReading := context.WithCancelCause(ctx)
	d.Start(readCtx, stopReading) // a commit that fails ends reading; drain halts it
	watched := make(chan struct{})
	go func() { // stops reading at the first publish failure; ends with reading
		defer close(watched)
		select {
		case err := <-pub.failed:
			d.Fail(err) // a commit waiting for this event's ack
			stopReading(err)
		case <-readCtx.Done():
		}
	}()
	var watch sync.WaitGroup
	watch.Go(func() { // ends with reading; a table gone from the publication ends reading
		interval := cfg.Stream.HeartbeatInterval
		if interval == 0 {
			interval = 10 * time.Second
		}
		idle := func() bool { n, _ := track.InFlight(); return n == 0 }
		if err := slot.Watch(readCtx, slot.WatchConfig{
			URL: cfg.PostgresURL, Target: target, Interval: interval, Heartbeat: cfg.Stream.HeartbeatInterval > 0,
			Idle: idle, OnSlot: r.metrics.Slot, Logger: log,
		}); err != nil {
			stopReading(err)
		}
	})
	var handleErr error // the pipeline's own failure (a row, a publish), not the stream's
	runErr = stream.Run(readCtx, func(ctx context.Context, lsn pglogrepl.LSN, data []byte) error {
		err := p.handle(ctx, lsn, data)
		if err != nil && ctx.Err() == nil {
			handleErr = err
		}
		return err
	})
	lost = runErr != nil && readCtx.Err() == nil && handleErr == nil
	if runErr != nil {
		d.ReadFailed() // a failure of the handler's own, timed before the drain
	}
	r.live.streaming.Store(false)
	stopReading(runErr)
	<-watched
	watch.Wait()
	if ctx.Err() != nil {
		runErr = nil // a signal: drain and confirm
	}
	return runErr, lost
}

// drain ends a session: the writer flushes its batches and waits for
// their acks (or failures), bounded by the drain timeout; then the final
// position is confirmed. Events still unacked are simply not confirmed:
// they are read again by the next run. It returns runErr, or a failure
// to close when there was none.
func (r *Relay) drain(ctx context.Context, track *checkpoint.Tracker, pub *publisher, stream *replication.Stream, d delivery.Session, runErr error, lost bool) error {
	cfg, log := r.cfg, r.log
	// Drain: the writer flushes its batches and waits for their acks (or
	// failures), bounded by the drain timeout; then the final position is
	// confirmed. Events still unacked are simply not confirmed: they are
	// read again by the next run.
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.Stream.DrainTimeout)
	defer cancel()
	events, bytes := track.InFlight()
	switch {
	case ctx.Err() != nil:
		log.Info("draining", slog.Int("events", events), slog.Int64("bytes", bytes), slog.Duration("timeout", cfg.Stream.DrainTimeout))
	case lost && d.DrainsWhenSlotGone() && r.slotGoneForHeal():
		log.Info("the slot is gone: publishing and cleaning what is in flight before the heal, so that it reads those rows no more",
			slog.Int("events", events))
	case lost:
		// Publishing what is queued, or retrying what is out, would only
		// publish twice what the slot replays to whoever streams it next.
		if events > 0 {
			log.Warn("replication connection lost: events not yet acknowledged are abandoned, not sent; the slot replays them",
				slog.Int("events", events))
		}
		cancel()
	}
	closeErr := pub.close(drainCtx)
	if events, _ := track.InFlight(); events > 0 && ctx.Err() != nil {
		log.Warn("drain incomplete; unacknowledged events will be read again on restart", slog.Int("events", events), slog.Any("err", closeErr))
	}
	// Exactly-once's last Kafka transaction commits before the final
	// position is confirmed, unless the session failed or lost its slot.
	closeErr = errors.Join(closeErr, d.Finish(drainCtx, runErr == nil && !lost, closeErr == nil))
	closeErr = errors.Join(closeErr, stream.Close(drainCtx))
	if runErr == nil && ctx.Err() == nil {
		runErr = closeErr
	}
	return runErr
}

// withOIDs is the target with its tables' OIDs, which the decoder follows
// through a rename.
func (r *Relay) withOIDs(ctx context.Context) (slot.Target, error) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return r.target, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	return slot.WithOIDs(ctx, conn, r.target)
}
