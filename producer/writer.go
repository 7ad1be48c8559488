package producer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// WriterConfig is what the produce engine needs to know.
type WriterConfig struct {
	Brokers []string
	// BatchSize bounds the records of one partition in one request; 0: 1000.
	BatchSize int
	// BatchTimeout is the least time between two requests to one broker
	// while records keep coming (see sender); a request after a quiet spell
	// leaves at once.
	BatchTimeout time.Duration
	// MaxInFlightRequests bounds the produce requests out at once on each
	// broker's connection, as the Java producer's
	// max.in.flight.requests.per.connection: 1 to 5 (the most a broker
	// deduplicates per partition); 0: 5. Only full batches (a backlog)
	// send a request while another is out.
	MaxInFlightRequests int
	// Compression is the codec of every record batch; "" is none.
	Compression Compression
	// MaxMessageBytes bounds one record (key, value and headers): a batch
	// holds about max(MaxMessageBytes+4 KiB, 1 MiB). 0: DefaultMaxMessageBytes.
	MaxMessageBytes int
	// CreateTopics creates a missing topic through the admin API, as
	// Specify or TopicSpec says.
	CreateTopics bool
	TopicSpec    TopicSpec
	// AutoCreateTopics asks the broker to create a missing topic (the broker
	// must allow it too), when CreateTopics is off.
	AutoCreateTopics bool
	// MetadataMaxAge is how long a topic's partitions are trusted before
	// they are asked again (a partition added is used after at most this
	// long); 0: a minute.
	MetadataMaxAge time.Duration
	// MissingTopicTimeout is how long a record waits for its topic to exist
	// before it fails with ReasonTopicMissing.
	MissingTopicTimeout time.Duration
	// Transaction, when set, makes the writer a transactional producer
	// for exactly-once delivery (see Transaction); nil: an idempotent one.
	Transaction Transaction
	// Security is how the brokers are reached (TLS, SASL).
	Security Security
	// Observer is told of requests and acknowledgements, for metrics; nil: none.
	Observer Observer
	Logger   *slog.Logger
	// RetryBackoffMin and RetryBackoffMax bound the capped, jittered
	// backoff between the attempts of what failed transiently (a produce
	// request, a topic's partitions asked): from Min, doubling up to Max;
	// 0: 100 ms and 5 s. Tests shorten them.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Hold, when set, is called before every produce request and may
	// delay it, returning once ctx ends (the writer abandoned) at the
	// latest: after the process stalled, it gives the source of records
	// the time to learn whether it still owns them (see relay's stall
	// guard). nil: requests leave at once.
	Hold func(ctx context.Context)
	// DeadLetters, when set, turns a record the brokers refuse for what it
	// is (too large for its topic, an invalid record) into the dead letter
	// sent instead (see salvage); nil: such a record fails.
	DeadLetters DeadLetters
}

// DeadLetters is what the writer asks of its caller when the brokers
// refuse a record for what it is: the engine knows no envelope, the
// caller builds the dead letter.
type DeadLetters interface {
	// Letter returns what to send instead of rec, refused for refusal
	// (its Reason set), or false: rec fails with the refusal. For rec a
	// dead letter itself (its Reason set), the letter goes again in rec's
	// place (its topic's max.message.bytes is below the writer's); for any
	// other record, it is queued to its own topic and partition, and
	// carries rec's token.
	Letter(rec Outgoing, refusal *Error) (Outgoing, bool)
	// Lettered is told once the dead letter of rec, not itself a dead
	// letter, is written.
	Lettered(rec, letter Outgoing, refusal *Error)
}

// Outgoing is a record handed to the writer: where it goes, what it
// holds, and what the writer hands back with its fate.
type Outgoing struct {
	Topic   string
	Key     []byte // nil: a null key, spread as the Java client spreads them
	Value   []byte
	Headers []Header
	Time    time.Time
	// Partition is the partition the caller names, as text (a row's
	// partition column); empty: by the key (murmur2). Text that is not
	// an integer (ReasonInvalidPartition), or not a partition of the
	// topic (ReasonPartitionOutOfRange, once the brokers were asked
	// again), fails the record.
	Partition string
	// Token is handed back to Done with the record's fate.
	Token uint64
	// Reason is a dead letter's reason (handed back to Done as its fate's);
	// empty for any other record.
	Reason string
	// Commit is the commit time of the record's event, for Observer.Acked.
	Commit time.Time
	// Meta is the caller's, handed back to DeadLetters untouched.
	Meta any
	// settled, for a salvage's dead letter (queueDeadLetter), is told
	// its fate instead of Done (the salvage reports it, in its source
	// partition's order); nil for any other record.
	settled chan error
}

// Size is a record's weight against MaxMessageBytes: its key, value and
// headers.
func (r *Outgoing) Size() int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Done receives the fate of the record handed over with token: err is nil
// once every in-sync replica has it (acks=all) or, for a record refused
// for what it is, once its dead letter is (then reason is the dead
// letter's reason; the record's own Reason for a dead letter written);
// otherwise err says why it was not written. It is called from the
// writer's goroutines, in order within a partition.
type Done func(token uint64, reason string, err error)

// Writer is the produce engine: it publishes records to Kafka
// asynchronously. Each record joins its partition's queue; one sender per
// broker sends produce requests on a connection of its own, each carrying
// a batch of every partition that broker leads with records waiting (see
// sender). What arrives while a request is out goes in the next one, so
// batches grow with the broker's round trip instead of queueing behind
// it, and a trickle over many partitions costs one request per round
// rather than one per partition; a backlog keeps up to
// MaxInFlightRequests requests out. A partition's batches out at once keep
// their sequence order, and a batch that failed is sent again before
// anything newer of its partition (see settle): one key's records keep
// their order. A record the brokers refuse for what it is goes as its dead
// letter (DeadLetters); a record it can neither publish nor dead-letter
// stops its partition (nothing after it there is sent, see salvage).
type Writer struct {
	cfg        WriterConfig
	client     *kafka.Client
	batchBytes int
	codec      kafka.Compression // cfg.Compression's
	done       Done
	log        *slog.Logger
	missing    missingTopics

	depth  int    // WriterConfig.MaxInFlightRequests
	dialer Dialer // the senders' connections

	// backoffMin and backoffMax bound the backoff of what is retried
	// (WriterConfig.RetryBackoffMin, RetryBackoffMax).
	backoffMin, backoffMax time.Duration

	index  index          // partitions, senders and brokers (index.go)
	owned  sync.WaitGroup // the senders, salvages and lookups
	routes routes         // where records go (routes.go)
	// enqueuing counts the records between their routing and their queue
	// (enqueue): no drain ends meanwhile.
	enqueuing atomic.Int64

	// abandon ends produce requests and retries once Close gives up waiting.
	abandon   context.Context
	abandoned context.CancelFunc

	idem idempotence // the producer id batches carry (idempotence.go)

	health health // produce failing, or not (health.go)

	closed   atomic.Bool
	flushing atomic.Bool // Flush: requests leave without waiting out BatchTimeout
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

// Transient produce failures are retried with capped, jittered backoff
// (backoff.Delay from WriterConfig.RetryBackoffMin, by default backoffMin,
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
func NewWriter(cfg WriterConfig, done Done) *Writer {
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
	codec := Codec(cfg.Compression)
	if codec == kafka.Lz4 {
		UseSmallLZ4Blocks()
	}
	if cfg.RetryBackoffMin <= 0 {
		cfg.RetryBackoffMin = backoffMin
	}
	if cfg.RetryBackoffMax <= 0 {
		cfg.RetryBackoffMax = backoffMax
	}
	cfg.RetryBackoffMax = max(cfg.RetryBackoffMax, cfg.RetryBackoffMin)
	w := &Writer{
		cfg: cfg, log: log, done: done, missing: missingTopics{since: map[string]time.Time{}}, codec: codec,
		client:     &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: produceTimeout, Transport: cfg.Security.CountingTransport(cfg.Observer.Sent, cfg.MetadataMaxAge)},
		batchBytes: max(cfg.MaxMessageBytes+4096, 1<<20),
		depth:      cfg.MaxInFlightRequests,
		backoffMin: cfg.RetryBackoffMin,
		backoffMax: cfg.RetryBackoffMax,
		index:      newIndex(),
		routes:     newRoutes(cfg.BatchSize),
	}
	tr := w.client.Transport.(*kafka.Transport)
	w.dialer = Dialer{ClientID: tr.ClientID, Dial: tr.Dial, TLS: tr.TLS, SASL: tr.SASL, Timeout: tr.DialTimeout}
	w.health = newHealth(log, cfg.Observer, cfg.Transaction)
	w.abandon, w.abandoned = context.WithCancel(context.Background())
	if w.transactional() {
		w.startTransactional()
	}
	return w
}

// Produce hands rec to the writer; its fate reaches Done with rec.Token.
// It blocks only while the brokers cannot be asked where the topic's
// partitions are, retrying with capped, jittered backoff until ctx ends.
// A record that can never be published (its topic missing past
// MissingTopicTimeout, a partition it names that is not one, a topic name
// Kafka rejects) is returned as a permanent *Error with its Reason; any
// other error means rec was not handed over because ctx ended or the
// writer is closed.
func (w *Writer) Produce(ctx context.Context, rec Outgoing) error {
	return w.write(ctx, rec, false)
}

// Specify records how to create topic (with CreateTopics), unless it is
// already known: a route's own spec, instead of TopicSpec.
func (w *Writer) Specify(topic string, spec TopicSpec) { w.routes.specify(topic, spec) }

// Topics returns the most topics the writer keeps state for: in its
// routes, or partitions of distinct topics. Its caller bounds them (a
// topic cap); each topic costs the writer memory for its life.
func (w *Writer) Topics() int {
	topics := map[string]bool{}
	w.index.parts.Range(func(k, _ any) bool {
		topics[k.(topicPartition).topic] = true
		return true
	})
	return max(len(topics), w.routes.sizes())
}

// Close sends what is buffered and waits for every completion, or until
// ctx ends; then requests still out are abandoned and their records are
// reported failed. It is safe to call twice.
func (w *Writer) Close(ctx context.Context) error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	w.index.wakeAll() // after closed is set: no sender is made for Produce after it (index.senderFor)
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

// hold delays a request as WriterConfig.Hold says; it returns an error
// once the writer is abandoned, when the request must not leave.
func (w *Writer) hold() error {
	if w.cfg.Hold != nil {
		w.cfg.Hold(w.abandon)
	}
	if w.abandon.Err() != nil {
		return fmt.Errorf("writer abandoned: %w", w.abandon.Err())
	}
	return nil
}
