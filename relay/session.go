package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// session is one replication connection and one Kafka writer, from start to
// the first failure or to ctx's end. It reports whether streaming began.
func (r *Relay) session(ctx context.Context, start pglogrepl.LSN) (bool, error) {
	cfg, target, log := r.cfg, r.target, r.log
	if start == 0 {
		return false, errors.New("slot position unknown")
	}
	track := checkpoint.New(start, cfg.MaxInFlight, cfg.MaxInFlightBytes)
	pub, err := r.newPublisher(ctx, track)
	if err != nil {
		return false, err
	}
	stream, err := replication.Connect(ctx, replication.StreamConfig{
		URL: cfg.PostgresURL, Slot: cfg.Slot, Publication: cfg.Publication, StatusInterval: cfg.StatusInterval, ConfirmEvery: cfg.ConfirmInterval,
		ReceiveTimeout: cfg.ReceiveTimeout, Logger: log,
	}, track)
	if err != nil {
		return false, errors.Join(err, pub.close(context.Background()))
	}
	if err := stream.Start(ctx, start); err != nil {
		return false, errors.Join(err, stream.Close(context.Background()), pub.close(context.Background()))
	}

	r.live.begin(track, stream)
	r.live.writer.Store(pub.writer)
	defer r.live.writer.Store(nil)
	defer r.live.end()
	dec := decode.New(target.Tables...)
	dec.DecodeMessages(cfg.MessagePrefix)
	p := &pipeline{dec: dec, track: track, pub: pub.writer, clean: pub.cleaner}
	readCtx, stopReading := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() { // stops reading at the first publish failure; ends with reading
		defer close(watched)
		select {
		case err := <-pub.failed:
			stopReading(err)
		case <-readCtx.Done():
		}
	}()
	var watch sync.WaitGroup
	watch.Go(func() { // ends with reading; a table gone from the publication ends reading
		interval := cfg.HeartbeatInterval
		if interval == 0 {
			interval = 10 * time.Second
		}
		idle := func() bool { n, _ := track.InFlight(); return n == 0 }
		if err := replication.Watch(readCtx, replication.WatchConfig{
			URL: cfg.PostgresURL, Target: target, Interval: interval, Heartbeat: cfg.HeartbeatInterval > 0,
			Idle: idle, OnSlot: r.metrics.Slot, Logger: log,
		}); err != nil {
			stopReading(err)
		}
	})
	runErr := stream.Run(readCtx, p.handle)
	r.live.streaming.Store(false)
	stopReading(runErr)
	<-watched
	watch.Wait()
	if ctx.Err() != nil {
		runErr = nil // a signal: drain and confirm
	}

	// Drain: the writer flushes its batches and waits for their acks (or
	// failures), bounded by the drain timeout; then the final position is
	// confirmed. Events still unacked are simply not confirmed: they are
	// read again by the next run.
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	events, bytes := track.InFlight()
	if ctx.Err() != nil {
		log.Info("draining", slog.Int("events", events), slog.Int64("bytes", bytes), slog.Duration("timeout", cfg.DrainTimeout))
	}
	closeErr := pub.close(drainCtx)
	if events, _ := track.InFlight(); events > 0 && ctx.Err() != nil {
		log.Warn("drain incomplete; unacknowledged events will be read again on restart", slog.Int("events", events), slog.Any("err", closeErr))
	}
	closeErr = errors.Join(closeErr, stream.Close(drainCtx))
	if runErr == nil && ctx.Err() == nil {
		runErr = closeErr
	}
	return true, runErr
}
