package relay

import (
	"context"
	"errors"
	"sync"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/delivery"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// publisher is a Kafka writer whose acknowledgements reach a checkpoint,
// through the cleaner when --cleanup is on (a row deleted or marked first).
// A session and a backfill each have one.
type publisher struct {
	writer  *sink.Writer
	cleaner *cleanup.Cleaner // nil without --cleanup
	failed  chan error       // the first publish failure; later ones add nothing

	stopCleaning context.CancelFunc
	cleaning     sync.WaitGroup
}

// acker takes the acknowledgement of an event (checkpoint.Tracker; the
// backfill's entry, which also tells the row's done).
type acker interface{ Ack(seq checkpoint.Seq) }

// newPublisher returns a publisher whose acknowledgements reach track,
// written as w says. hold, when set, may delay each produce request (see
// stallGuard).
func (r *Relay) newPublisher(ctx context.Context, track acker, hold func(context.Context), w delivery.Writes) (*publisher, error) {
	cfg := r.cfg
	p := &publisher{failed: make(chan error, 1)}
	ack := func(seq uint64) { track.Ack(checkpoint.Seq(seq)) }
	if cfg.Cleanup != cleanup.None {
		var err error
		if p.cleaner, err = cleanup.New(ctx, cleanup.Config{URL: cfg.PostgresURL, Tables: cfg.CleanupTables(), Ack: ack,
			OnDeleted: r.metrics.Deleted, OnMarked: r.metrics.Marked, Logger: r.log}); err != nil {
			return nil, err
		}
	}
	dlq := ""
	if cfg.Topics.OnInvalid == OnInvalidDLQ {
		dlq = cfg.Topics.DeadLetterTopic
	}
	pc := cfg.Producer
	pc.BatchTimeout = w.BatchTimeout(pc.BatchTimeout)
	p.writer = sink.NewWriter(sink.Config{
		Brokers: cfg.Kafka.Brokers, Topic: r.admit.Default, Topics: r.admit.Routes, Reserved: r.admit.Reserved, BatchSize: pc.BatchSize, BatchTimeout: pc.BatchTimeout, MaxInFlightRequests: pc.MaxInFlightRequests, Compression: pc.Compression,
		MaxMessageBytes: pc.MaxMessageBytes, CreateTopics: cfg.Topics.Create, TopicSpec: cfg.Defaults.Route.Spec,
		AutoCreateTopics: cfg.Topics.AutoCreate, MetadataMaxAge: pc.MetadataMaxAge, MissingTopicTimeout: pc.MissingTopicTimeout,
		DeadLetterTopic: dlq, Envelope: pc.Envelope, ConnectExpandPayload: pc.ConnectExpandPayload, CloudEventsSource: pc.CloudEventsSource, MetadataHeaders: pc.MetadataHeaders,
		Timestamp: pc.Timestamp, Contracts: r.contract, Registry: r.registry, Security: r.security, Observer: r.metrics, Logger: r.log, Hold: hold, Transaction: w.Transaction(),
	}, func(token uint64, reason string, err error) {
		switch {
		case err != nil:
			select {
			case p.failed <- err:
			default:
			}
		case p.cleaner != nil:
			w.RowAcked(p.cleaner, token, reason, ack)
		default:
			ack(token)
		}
	})
	cleanCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stopCleaning = stop
	if p.cleaner != nil {
		p.cleaning.Go(func() { p.cleaner.Run(cleanCtx) }) // ends in close, after the writer's drain
	}
	return p, nil
}

// close drains: the writer flushes its batches and waits for their acks
// (or failures), bounded by ctx; then the cleaner cleans and acks what is
// left. What is still unacked is not confirmed, and is read again.
func (p *publisher) close(ctx context.Context) error {
	err := p.writer.Close(ctx)
	p.stopCleaning()
	p.cleaning.Wait()
	if p.cleaner != nil {
		err = errors.Join(err, p.cleaner.Close(ctx))
	}
	return err
}

// delivered is what the delivery mode may ask of p.
func (p *publisher) delivered() delivery.Publisher {
	d := delivery.Publisher{Flush: p.writer.Flush}
	if p.cleaner != nil { // not a nil *Cleaner in a non-nil interface
		d.Cleaner = p.cleaner
	}
	return d
}
