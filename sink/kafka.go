package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// Config is what the writer needs to know.
type Config struct {
	Brokers []string
	Topic   Topic // the topic template of events of tables missing from Topics
	// Topics holds each outbox table's own topic template, by schema.table.
	Topics map[string]Topic
	// BatchSize, BatchTimeout, MaxInFlightRequests, Compression and
	// MaxMessageBytes are the produce engine's (producer.WriterConfig);
	// an event whose record exceeds MaxMessageBytes is dead-lettered
	// without being sent. Keep it at or below the topics'
	// max.message.bytes (broker default 1048588).
	BatchSize           int
	BatchTimeout        time.Duration
	MaxInFlightRequests int
	Compression         Compression
	MaxMessageBytes     int
	// CreateTopics (as its route's spec, Topic.WithSpec, or TopicSpec
	// says), AutoCreateTopics, MetadataMaxAge and MissingTopicTimeout are
	// the produce engine's (producer.WriterConfig); an event whose topic
	// is missing past MissingTopicTimeout is dead-lettered.
	CreateTopics        bool
	TopicSpec           TopicSpec
	AutoCreateTopics    bool
	MetadataMaxAge      time.Duration
	MissingTopicTimeout time.Duration
	// DeadLetterTopic receives what cannot be published, with the reason in
	// headers. Empty means no dead-lettering: such an event fails the stream.
	DeadLetterTopic string
	// Reserved are the topics no event may be routed to (Topic.Admit);
	// its DeadLetter is DeadLetterTopic when empty.
	Reserved Reserved
	// Envelope is EnvelopeRaw (the default), EnvelopeCloudEvents,
	// EnvelopeCloudEventsStructured or EnvelopeConnectJSON.
	Envelope Envelope
	// ConnectExpandPayload, with EnvelopeConnectJSON, sends a JSON payload
	// as JSON with a schema inferred from it instead of as a string (see
	// expander).
	ConnectExpandPayload bool
	// CloudEventsSource is ce_source; empty: /outbox-cdc/ and the table.
	CloudEventsSource string
	// MetadataHeaders adds the commit LSN, transaction id and commit time.
	MetadataHeaders bool
	// Timestamp is where record timestamps come from: TimestampColumn
	// (the default, also for "") or TimestampCommit.
	Timestamp Timestamp
	// Contracts, when set, checks each payload before it is published;
	// what it refuses is dead-lettered (ReasonContractViolation,
	// ReasonContractMissing). nil: no check.
	Contracts Contracts
	// Registry, when set, frames the values of events whose type has a
	// contract in its wire format (0x00, the schema id, the payload),
	// registering each contract on first use; refused contracts are
	// dead-lettered (ReasonSchemaRegistryRefused). nil: values unframed.
	Registry Registry
	// Transaction, when set, makes the writer a transactional producer
	// for exactly-once delivery (see Transaction); nil: an idempotent one.
	Transaction Transaction
	// Security is how the brokers are reached (TLS, SASL).
	Security Security
	// Observer is told each event's fate, for metrics; nil: none.
	Observer Observer
	Logger   *slog.Logger
	// RetryBackoffMin, RetryBackoffMax and Hold are the produce
	// engine's (producer.WriterConfig): the backoff of what failed
	// transiently (0: 100 ms and 5 s; tests shorten them), and a delay
	// before every produce request (relay's stall guard; nil: none).
	RetryBackoffMin, RetryBackoffMax time.Duration
	Hold                             func(ctx context.Context)
}

// Done receives the fate of the event published with token: err is nil once
// every in-sync replica has it (acks=all) or, for an event that could not be
// published, once its dead letter is (then reason is the dead letter's
// reason, such as message_too_large; empty for an event published); otherwise err says
// why it was not written. It is called from the writer's goroutines, in
// order within a partition.
type Done = producer.Done

// Writer publishes events to Kafka: it turns each into its record (or its
// dead letter) and hands it to the produce engine (producer.Writer), which
// sends it asynchronously, in order within a partition, and reports its
// fate to Done. It dead-letters what Kafka can never accept, before
// sending and, through the engine's DeadLetters, what the brokers refuse.
type Writer struct {
	cfg    Config
	engine *producer.Writer
	log    *slog.Logger

	shape   shape   // events into records (envelope.go)
	letters letters // dead letters built (deadletter.go)

	deadLetter atomic.Int64
}

// eventMeta travels with each record through the engine
// (producer.Outgoing.Meta), for the dead letter of a record the brokers
// refuse (refusals).
type eventMeta struct {
	lsn   pglogrepl.LSN
	table string // the outbox table, for dead-letter headers
}

// DefaultMaxMessageBytes leaves room under the broker's default
// max.message.bytes (1048588) for the record batch's own overhead.
const DefaultMaxMessageBytes = producer.DefaultMaxMessageBytes

// NewWriter returns a writer whose completions go to done.
func NewWriter(cfg Config, done Done) *Writer {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Reserved.DeadLetter == "" {
		cfg.Reserved.DeadLetter = cfg.DeadLetterTopic
	}
	w := &Writer{cfg: cfg, log: log}
	w.shape = shapeOf(cfg)
	w.letters = letters{topic: cfg.DeadLetterTopic, maxBytes: cfg.MaxMessageBytes, shape: w.shape}
	w.engine = producer.NewWriter(producer.WriterConfig{
		Brokers: cfg.Brokers, BatchSize: cfg.BatchSize, BatchTimeout: cfg.BatchTimeout, MaxInFlightRequests: cfg.MaxInFlightRequests,
		Compression: cfg.Compression, MaxMessageBytes: cfg.MaxMessageBytes,
		CreateTopics: cfg.CreateTopics, TopicSpec: cfg.TopicSpec, AutoCreateTopics: cfg.AutoCreateTopics,
		MetadataMaxAge: cfg.MetadataMaxAge, MissingTopicTimeout: cfg.MissingTopicTimeout,
		Transaction: cfg.Transaction, Security: cfg.Security, Observer: cfg.Observer, Logger: log,
		RetryBackoffMin: cfg.RetryBackoffMin, RetryBackoffMax: cfg.RetryBackoffMax, Hold: cfg.Hold,
		DeadLetters: refusals{w},
	}, done)
	return w
}

// Publish hands ev to the writer; its fate reaches Done with token. It blocks
// only while the broker cannot be asked where the topic's partitions are,
// or the schema registry (Config.Registry) cannot register ev's contract,
// retrying with capped, jittered backoff until ctx ends. An event that can
// never be published (a payload its contract refuses, a topic name Kafka rejects, or the route's allow-list
// or topic cap refuses, too large, a topic that does not exist) is
// dead-lettered instead, or, without a dead-letter topic,
// returned as a permanent *Error. Any other error means ev was not handed
// over because ctx ended.
func (w *Writer) Publish(ctx context.Context, ev *decode.Event, token uint64) error {
	route, ok := w.cfg.Topics[ev.Table]
	if !ok {
		route = w.cfg.Topic
	}
	topic := route.Name(ev)
	if n := w.shape.renamedRowHeaders(ev); n > 0 { // once per event, whatever becomes of it
		w.cfg.Observer.RowHeadersRenamed(n)
	}
	// A payload too large for any record is dead-lettered as such below,
	// without reading it against its contract first.
	if len(ev.Payload) <= w.cfg.MaxMessageBytes {
		if refused, err := w.enforceContract(ctx, ev, topic, token); refused {
			return err
		}
	}
	// Before anything is kept per topic: a refused name leaves no trace.
	if perr := route.Admit(topic, w.cfg.Reserved); perr != nil {
		return w.deadLetterEvent(ctx, ev, topic, token, perr)
	}
	if w.cfg.CreateTopics && route.spec != nil {
		w.engine.Specify(topic, *route.spec)
	}
	// Built only if it can fit (shape.value): a row too large is dead-lettered
	// once, without its value, at a few times the limit's cost.
	value, n, fits := w.shape.value(ev)
	if !fits {
		return w.deadLetterTooLarge(ctx, ev, topic, token, fmt.Errorf("record of at least %d bytes exceeds --max-message-bytes %d",
			len(ev.AggregateID)+n, w.cfg.MaxMessageBytes), n)
	}
	value, settled, err := w.value(ctx, ev, topic, token, value)
	if settled {
		return err
	}
	var key []byte // nil: a null key, spread as the Java client spreads them
	if ev.AggregateID != "" {
		key = []byte(ev.AggregateID)
	}
	rec := producer.Outgoing{
		Topic:     topic,
		Key:       key,
		Value:     value,
		Headers:   w.shape.headers(ev),
		Time:      w.shape.recordTime(ev),
		Partition: ev.Partition,
		Token:     token,
		Commit:    ev.CommitTime,
		Meta:      eventMeta{lsn: ev.CommitLSN, table: ev.Table},
	}
	if n := rec.Size(); n > w.cfg.MaxMessageBytes {
		return w.deadLetterTooLarge(ctx, ev, topic, token, fmt.Errorf("record of %d bytes exceeds --max-message-bytes %d",
			n, w.cfg.MaxMessageBytes), len(value))
	}
	err = w.engine.Produce(ctx, rec)
	var perr *Error
	if errors.As(err, &perr) && perr.Reason != "" {
		return w.deadLetterEvent(ctx, ev, topic, token, perr)
	}
	return err
}

// DeadLettered returns how many events this writer dead-lettered.
func (w *Writer) DeadLettered() int64 { return w.deadLetter.Load() }

// Close sends what is buffered and waits for every completion, or until
// ctx ends; then requests still out are abandoned and their events are
// reported failed. It is safe to call twice.
func (w *Writer) Close(ctx context.Context) error { return w.engine.Close(ctx) }

// Flush, while on, sends what is queued at once instead of pacing requests
// BatchTimeout apart: a Kafka commit waiting for the last acknowledgements
// holds back every event behind it, so the last batches should not wait.
func (w *Writer) Flush(on bool) { w.engine.Flush(on) }

// Failing reports, when requests have failed for at least d with no
// success since (produce requests, or in a transaction any of its
// requests), since when, the request that failed last and its error.
func (w *Writer) Failing(d time.Duration) (since time.Time, request, last string, failing bool) {
	return w.engine.Failing(d)
}
