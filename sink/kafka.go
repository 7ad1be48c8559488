package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// Config is what the writer needs to know.
type Config struct {
	Brokers []string
	Topic   Topic // the topic template of events of tables missing from Topics
	// Topics holds each outbox table's own topic template, by schema.table.
	Topics map[string]Topic
	// BatchSize bounds the messages of one partition in one request.
	BatchSize int
	// BatchTimeout is the least time between two requests to one broker
	// while events keep coming (see sender); a request after a quiet spell
	// leaves at once.
	BatchTimeout time.Duration
	// MaxInFlightRequests bounds the produce requests out at once on each
	// broker's connection, as the Java producer's
	// max.in.flight.requests.per.connection: 1 to 5 (the most a broker
	// deduplicates per partition); 0: 5. Only full batches (a backlog)
	// send a request while another is out.
	MaxInFlightRequests int
	// Compression is the codec of every record batch; 0 is none.
	Compression kafka.Compression
	// MaxMessageBytes bounds one record (key, value and headers). A larger
	// event is dead-lettered without being sent. Keep it at or below the
	// topics' max.message.bytes (broker default 1048588).
	MaxMessageBytes int
	// CreateTopics creates a missing topic through the admin API, as its
	// route's spec (Topic.WithSpec) or TopicSpec says.
	CreateTopics bool
	TopicSpec    TopicSpec
	// AutoCreateTopics asks the broker to create a missing topic (the broker
	// must allow it too), when CreateTopics is off.
	AutoCreateTopics bool
	// MetadataMaxAge is how long a topic's partitions are trusted before
	// they are asked again (a partition added is used after at most this
	// long); 0: a minute.
	MetadataMaxAge time.Duration
	// MissingTopicTimeout is how long an event waits for its topic to exist
	// before it is dead-lettered.
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
	// RetryBackoffMin and RetryBackoffMax bound the capped, jittered
	// backoff between the attempts of what failed transiently (a produce
	// request, a topic's partitions asked): from Min, doubling up to Max;
	// 0: 100 ms and 5 s. Tests shorten them.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Hold, when set, is called before every produce request and may
	// delay it, returning once ctx ends (the writer abandoned) at the
	// latest: after the process stalled, it gives the source of events
	// the time to learn whether it still owns them (see relay's stall
	// guard). nil: requests leave at once.
	Hold func(ctx context.Context)
}

// Done receives the fate of the event published with token: err is nil once
// every in-sync replica has it (acks=all) or, for an event that could not be
// published, once its dead letter is (then reason is the dead letter's
// reason, such as message_too_large; empty for an event published); otherwise err says
// why it was not written. It is called from the writer's goroutines, in
// order within a partition.
type Done func(token uint64, reason string, err error)

// Writer publishes events to Kafka asynchronously. Each event joins its
// partition's queue; one sender per broker sends produce requests on a
// connection of its own, each carrying a batch of every partition that
// broker leads with events waiting (see sender). What arrives while a
// request is out goes in the next one, so batches grow with the broker's
// round trip instead of queueing behind it, and a trickle over many
// partitions costs one request per round rather than one per partition; a
// backlog keeps up to MaxInFlightRequests requests out. A partition's
// batches out at once keep their sequence order, and a batch that failed
// is sent again before anything newer of its partition (see settle): one
// key's events keep their order. It dead-letters what
// Kafka can never accept; an event it can neither publish nor dead-letter
// stops its partition (nothing after it there is sent, see salvage).
type Writer struct {
	cfg        Config
	client     *kafka.Client
	batchBytes int
	done       Done
	log        *slog.Logger
	missing    missingTopics

	depth  int             // Config.MaxInFlightRequests
	dialer producer.Dialer // the senders' connections

	// backoffMin and backoffMax bound the backoff of what is retried
	// (Config.RetryBackoffMin, RetryBackoffMax).
	backoffMin, backoffMax time.Duration

	index  index          // partitions, senders and brokers (index.go)
	owned  sync.WaitGroup // the senders, salvages and lookups
	routes routes         // where events go (routes.go)
	// enqueuing counts the events between their routing and their queue
	// (enqueue): no drain ends meanwhile.
	enqueuing atomic.Int64

	// abandon ends produce requests and retries once Close gives up waiting.
	abandon   context.Context
	abandoned context.CancelFunc

	idem idempotence // the producer id batches carry (idempotence.go)

	shape   shape   // events into records (envelope.go)
	letters letters // dead letters built (deadletter.go)
	health  health  // produce failing, or not (failing.go)

	closed     atomic.Bool
	flushing   atomic.Bool // Flush: requests leave without waiting out BatchTimeout
	deadLetter atomic.Int64
}

type topicPartition struct {
	topic string
	id    int
}

type topicCount struct {
	ids        []int   // 0 .. n-1, shared read-only
	leaders    []int32 // broker id of each partition's leader, shared read-only
	at         time.Time
	refreshing bool // a background lookup is under way
}

// meta travels with each message through kafka-go (Message.WriterData).
type meta struct {
	token  uint64
	lsn    pglogrepl.LSN
	commit time.Time // the event's commit time, for the latency metric
	table  string    // the outbox table, for dead-letter headers
	reason string    // of a dead letter (never dead-lettered again); empty for an event
	// partition is the row's partition column, as text (see pick);
	// empty: by the key.
	partition string
	// settled, for a salvage's dead letter (queueDeadLetter), is told
	// its fate instead of Done (the salvage reports it, in its source
	// partition's order); nil for any other message.
	settled chan error
}

// Transient produce failures are retried with capped, jittered backoff
// (backoff.Delay from Config.RetryBackoffMin, by default backoffMin,
// doubling up to RetryBackoffMax, by default backoffMax) until they
// succeed or the writer is abandoned.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// produceTimeout bounds one produce request; the broker is told the same.
	produceTimeout = 30 * time.Second
	// countTTL is how long a topic's partition count is trusted.
	countTTL = time.Minute
)

// DefaultMaxMessageBytes leaves room under the broker's default
// max.message.bytes (1048588) for the record batch's own overhead.
const DefaultMaxMessageBytes = 1_000_000

// NewWriter returns a writer whose completions go to done.
func NewWriter(cfg Config, done Done) *Writer {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.MaxInFlightRequests <= 0 || cfg.MaxInFlightRequests > 5 {
		cfg.MaxInFlightRequests = 5
	}
	if cfg.Reserved.DeadLetter == "" {
		cfg.Reserved.DeadLetter = cfg.DeadLetterTopic
	}
	if cfg.Compression == kafka.Lz4 {
		producer.UseSmallLZ4Blocks()
	}
	if cfg.RetryBackoffMin <= 0 {
		cfg.RetryBackoffMin = backoffMin
	}
	if cfg.RetryBackoffMax <= 0 {
		cfg.RetryBackoffMax = backoffMax
	}
	cfg.RetryBackoffMax = max(cfg.RetryBackoffMax, cfg.RetryBackoffMin)
	w := &Writer{
		cfg: cfg, log: log, done: done, missing: missingTopics{since: map[string]time.Time{}},
		client:     &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: produceTimeout, Transport: cfg.Security.CountingTransport(cfg.Observer.Sent, cfg.MetadataMaxAge)},
		batchBytes: max(cfg.MaxMessageBytes+4096, 1<<20),
		depth:      cfg.MaxInFlightRequests,
		backoffMin: cfg.RetryBackoffMin,
		backoffMax: cfg.RetryBackoffMax,
		index:      newIndex(),
		routes:     newRoutes(cfg.BatchSize),
	}
	tr := w.client.Transport.(*kafka.Transport)
	w.dialer = producer.Dialer{ClientID: tr.ClientID, Dial: tr.Dial, TLS: tr.TLS, SASL: tr.SASL, Timeout: tr.DialTimeout}
	w.shape = shapeOf(cfg)
	w.letters = letters{topic: cfg.DeadLetterTopic, maxBytes: cfg.MaxMessageBytes, shape: w.shape}
	w.health = newHealth(log, cfg.Observer, cfg.Transaction)
	w.abandon, w.abandoned = context.WithCancel(context.Background())
	if w.transactional() {
		w.startTransactional()
	}
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
		w.routes.specify(topic, *route.spec)
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
	msg := kafka.Message{
		Topic:      topic,
		Key:        key,
		Value:      value,
		Headers:    w.shape.headers(ev),
		Time:       w.shape.recordTime(ev),
		WriterData: meta{token: token, lsn: ev.CommitLSN, commit: ev.CommitTime, table: ev.Table, partition: ev.Partition},
	}
	if n := recordSize(&msg); n > w.cfg.MaxMessageBytes {
		return w.deadLetterTooLarge(ctx, ev, topic, token, fmt.Errorf("record of %d bytes exceeds --max-message-bytes %d",
			n, w.cfg.MaxMessageBytes), len(value))
	}
	err = w.write(ctx, msg, false)
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
func (w *Writer) Close(ctx context.Context) error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	w.index.wakeAll() // after closed is set: no sender is made for Publish after it (index.senderFor)
	drained := make(chan struct{})
	go func() { w.owned.Wait(); close(drained) }()
	select {
	case <-drained:
		w.abandoned()
		w.client.Transport.(*kafka.Transport).CloseIdleConnections()
		return nil
	case <-ctx.Done():
		w.abandoned()
		w.index.wakeAll()
		<-drained // abandoned requests return at once
		w.client.Transport.(*kafka.Transport).CloseIdleConnections()
		return fmt.Errorf("close kafka writer: %w", context.Cause(ctx))
	}
}

// hold delays a request as Config.Hold says; it returns an error once the
// writer is abandoned, when the request must not leave.
func (w *Writer) hold() error {
	if w.cfg.Hold != nil {
		w.cfg.Hold(w.abandon)
	}
	if w.abandon.Err() != nil {
		return fmt.Errorf("writer abandoned: %w", w.abandon.Err())
	}
	return nil
}
