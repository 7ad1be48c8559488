package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// run streams until ctx ends (a signal: drain, confirm, return nil) or a
// failure that retrying cannot mend. Failures after streaming has begun are
// retried with backoff by starting a new session from the slot's confirmed
// position; a failure before that is returned, so that a wrong URL or an
// unready server is reported at once.
func run(ctx context.Context, cfg config.Config, topic sink.Topic, log *slog.Logger) error {
	target := replication.Target{
		Schema: cfg.Schema, Table: cfg.Table, Publication: cfg.Publication, Slot: cfg.Slot,
		Columns: []string{cfg.Columns.ID, cfg.Columns.AggregateType, cfg.Columns.AggregateID, cfg.Columns.EventType, cfg.Columns.Payload},
	}
	// Kafka first: a wrong broker address should not leave a new slot behind
	// pinning WAL.
	if err := sink.Ping(ctx, cfg.KafkaBrokers); err != nil {
		return err
	}
	start, err := prepare(ctx, cfg.PostgresURL, target, true)
	if err != nil {
		return err
	}
	standby := false // another process streams the slot; we wait for it to let go
	for attempt := 0; ; attempt++ {
		began, err := session(ctx, cfg, target, topic, start, log)
		if ctx.Err() != nil {
			return nil
		}
		if !retriable(err) {
			return err
		}
		if began {
			attempt, standby = 0, false
		}
		var wait time.Duration
		if errors.Is(err, replication.ErrSlotActive) {
			// A second instance: quiet, and quick to take over.
			attempt = 0
			wait = standbyPoll/2 + rand.N(standbyPoll/2+1)
			if !standby {
				standby = true
				log.Info("standing by: the slot is streamed by another process; taking over when it lets go",
					slog.String("slot", cfg.Slot), slog.Any("err", err))
			}
		} else {
			wait = backoff(attempt)
			log.Warn("stream interrupted, reconnecting", slog.Any("err", err), slog.Duration("in", wait))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		if start, err = prepare(ctx, cfg.PostgresURL, target, false); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !retriable(err) {
				return err
			}
			start = 0 // session fails fast and we come back here
		}
	}
}

// standbyPoll is how often a standing-by instance tries the slot.
const standbyPoll = 2 * time.Second

func prepare(ctx context.Context, url string, t replication.Target, createSlot bool) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (is it running, and is --postgres-url right?): %w", err)
	}
	defer conn.Close(context.Background())
	return replication.Prepare(ctx, conn, t, createSlot)
}

// retriable tells failures that a new session may mend (a lost connection, a
// broker away too long) from those it cannot.
func retriable(err error) bool {
	var rowErr *decode.InvalidRowError
	var pubErr *sink.Error
	switch {
	case errors.As(err, &rowErr):
		return false
	case errors.As(err, &pubErr):
		return pubErr.Retriable
	case errors.Is(err, replication.ErrNotReady), errors.Is(err, replication.ErrColumnMissing), errors.Is(err, replication.ErrSlotInvalidated):
		return false
	}
	return true
}

func backoff(attempt int) time.Duration {
	d := time.Second << min(attempt, 5)
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	return d/2 + rand.N(d/2+1)
}

// session is one replication connection and one Kafka writer, from start to
// the first failure or to ctx's end. It reports whether streaming began.
func session(ctx context.Context, cfg config.Config, target replication.Target, topic sink.Topic, start pglogrepl.LSN, log *slog.Logger) (bool, error) {
	if start == 0 {
		return false, errors.New("slot position unknown")
	}
	track := checkpoint.New(start, cfg.MaxInFlight, cfg.MaxInFlightBytes)
	failed := make(chan error, 1) // the first publish failure; later ones add nothing
	dlq := ""
	if cfg.OnInvalid == config.OnInvalidDLQ {
		dlq = cfg.DeadLetterTopic
	}
	writer := sink.NewWriter(sink.Config{
		Brokers: cfg.KafkaBrokers, Topic: topic, BatchSize: cfg.BatchSize, BatchTimeout: cfg.BatchTimeout,
		MaxMessageBytes: cfg.MaxMessageBytes, AutoCreateTopics: cfg.AutoCreateTopics, MissingTopicTimeout: cfg.MissingTopicTimeout,
		DeadLetterTopic: dlq, Table: cfg.QualifiedTable(), Columns: cfg.Columns,
		Logger: log,
	}, func(token uint64, err error) {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
			return
		}
		track.Ack(checkpoint.Seq(token))
	})
	stream, err := replication.Connect(ctx, replication.StreamConfig{
		URL: cfg.PostgresURL, Slot: cfg.Slot, Publication: cfg.Publication, StatusInterval: cfg.StatusInterval,
		ReceiveTimeout: cfg.ReceiveTimeout, Logger: log,
	}, track)
	if err != nil {
		return false, errors.Join(err, writer.Close(context.Background()))
	}
	if err := stream.Start(ctx, start); err != nil {
		return false, errors.Join(err, stream.Close(context.Background()), writer.Close(context.Background()))
	}

	p := &pipeline{dec: decode.New(cfg.Schema, cfg.Table, cfg.Columns), track: track, pub: writer}
	readCtx, stopReading := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() { // stops reading at the first publish failure; ends with reading
		defer close(watched)
		select {
		case err := <-failed:
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
		if err := replication.Watch(readCtx, cfg.PostgresURL, target, interval, cfg.HeartbeatInterval > 0, idle, log); err != nil {
			stopReading(err)
		}
	})
	runErr := stream.Run(readCtx, p.handle)
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
	closeErr := writer.Close(drainCtx)
	if events, _ := track.InFlight(); events > 0 && ctx.Err() != nil {
		log.Warn("drain incomplete; unacknowledged events will be read again on restart", slog.Int("events", events), slog.Any("err", closeErr))
	}
	closeErr = errors.Join(closeErr, stream.Close(drainCtx))
	if runErr == nil && ctx.Err() == nil {
		runErr = closeErr
	}
	return true, runErr
}
