package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Config is what the writer needs to know.
type Config struct {
	Brokers      []string
	Topic        Topic
	BatchSize    int
	BatchTimeout time.Duration
	Logger       *slog.Logger
}

// Done receives the fate of the event published with token: err is nil once
// every in-sync replica has it (acks=all), or says why it was not written.
// It is called from the writer's goroutines, in order within a partition.
type Done func(token uint64, err error)

// Writer publishes events to Kafka asynchronously.
type Writer struct {
	w      *kafka.Writer
	topic  Topic
	log    *slog.Logger
	down   atomic.Bool // the broker refused the last attempt; logged once per outage
	closed atomic.Bool
}

// Retry bounds inside kafka-go: a batch is retried for transient errors in
// the partition's own goroutine, which holds the partition's later batches
// behind it, so one key's events keep their order while the broker is away.
const (
	maxAttempts = 60
	backoffMin  = 100 * time.Millisecond
	backoffMax  = time.Second
)

// NewWriter returns a writer whose completions go to done.
func NewWriter(cfg Config, done Done) *Writer {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{topic: cfg.Topic, log: log}
	w.w = &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...),
		// Same partition for a key as the Java client, so that consumers and
		// other producers agree where an aggregate's events live.
		Balancer:               &kafka.Murmur2Balancer{},
		RequiredAcks:           kafka.RequireAll,
		BatchSize:              cfg.BatchSize,
		BatchTimeout:           cfg.BatchTimeout,
		Async:                  true,
		AllowAutoTopicCreation: true,
		MaxAttempts:            maxAttempts,
		WriteBackoffMin:        backoffMin,
		WriteBackoffMax:        backoffMax,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			log.Debug("kafka writer", slog.String("msg", fmt.Sprintf(msg, args...)))
		}),
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				err = classify(err)
			}
			for i := range msgs {
				done(msgs[i].WriterData.(uint64), err)
			}
		},
	}
	return w
}

// Publish hands ev to the writer; its fate reaches Done with token. It blocks
// only while the broker cannot be asked where the topic's partitions are,
// retrying with capped, jittered backoff until ctx ends. An error means ev
// was not handed over: ctx ended, or the error is permanent (*Error).
func (w *Writer) Publish(ctx context.Context, ev *decode.Event, token uint64) error {
	topic := w.topic.Name(ev)
	if err := validTopicName(topic); err != nil {
		return &Error{Topic: topic, Err: err}
	}
	headers := make([]kafka.Header, 0, 3+len(ev.Headers))
	headers = append(headers,
		kafka.Header{Key: "id", Value: []byte(ev.ID)},
		kafka.Header{Key: "event_type", Value: []byte(ev.EventType)},
		kafka.Header{Key: "aggregate_type", Value: []byte(ev.AggregateType)},
	)
	for _, h := range ev.Headers {
		headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	msg := kafka.Message{
		Topic:      topic,
		Key:        []byte(ev.AggregateID),
		Value:      ev.Payload,
		Headers:    headers,
		Time:       ev.Time,
		WriterData: token,
	}
	for attempt := 0; ; attempt++ {
		err := w.w.WriteMessages(ctx, msg)
		if err == nil {
			if w.down.CompareAndSwap(true, false) {
				w.log.Info("kafka reachable again")
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish to %s: %w", topic, context.Cause(ctx))
		}
		perr := classify(err)
		if !perr.Retriable {
			return perr
		}
		switch {
		case errors.Is(err, kafka.UnknownTopicOrPartition), errors.Is(err, kafka.LeaderNotAvailable):
			// A topic being auto-created answers this way for a moment.
			w.log.Debug("topic not ready, retrying", slog.String("topic", topic), slog.Any("err", err))
		case w.down.CompareAndSwap(false, true):
			w.log.Warn("kafka unavailable, retrying", slog.String("topic", topic), slog.Any("err", err))
		}
		select {
		case <-time.After(jitter(attempt)):
		case <-ctx.Done():
			return fmt.Errorf("publish to %s: %w", topic, context.Cause(ctx))
		}
	}
}

// jitter returns a capped exponential backoff with full jitter.
func jitter(attempt int) time.Duration {
	d := backoffMin << min(attempt, 6)
	if d > 5*time.Second {
		d = 5 * time.Second
	}
	return d/2 + rand.N(d/2+1)
}

// Ping asks the brokers for cluster metadata, so that a wrong address is
// reported at start instead of retried forever.
func Ping(ctx context.Context, brokers []string) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client.Metadata(ctx, &kafka.MetadataRequest{}); err != nil {
		return fmt.Errorf("connect to kafka (is it running, and is --kafka-brokers right?): %w", err)
	}
	return nil
}

// Close flushes what is buffered and waits for every completion, or until
// ctx ends; it is safe to call twice.
func (w *Writer) Close(ctx context.Context) error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- w.w.Close() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("close kafka writer: %w", err)
		}
		return nil
	case <-ctx.Done():
		// kafka-go cannot abandon a batch it is retrying; the goroutine above
		// ends with the process.
		return fmt.Errorf("close kafka writer: %w", context.Cause(ctx))
	}
}

// Error is a failed publish, classified once here so that callers branch on
// Retriable rather than on broker error codes or strings.
type Error struct {
	Topic     string
	Err       error
	Retriable bool // the same message may succeed later
}

func (e *Error) Error() string {
	if e.Topic != "" {
		return fmt.Sprintf("publish to %s: %v", e.Topic, e.Err)
	}
	return fmt.Sprintf("publish: %v", e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var wes kafka.WriteErrors
	if errors.As(err, &wes) {
		for _, we := range wes {
			if we != nil {
				err = we
				break
			}
		}
	}
	var mtl kafka.MessageTooLargeError
	var kerr kafka.Error
	switch {
	case errors.As(err, &mtl):
		return &Error{Err: err}
	case errors.As(err, &kerr):
		return &Error{Err: err, Retriable: kerr.Temporary()}
	case errors.Is(err, context.Canceled):
		return &Error{Err: err}
	default:
		// Network failures, timeouts, a closed connection: the broker may
		// come back.
		return &Error{Err: err, Retriable: true}
	}
}
