package registry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
	"github.com/outbox-cdc/outbox-cdc/internal/tlsfiles"
)

// Documents gives each event type's contract as its file holds it
// (contract.Set does).
type Documents interface {
	Document(eventType string) ([]byte, bool)
}

// Config is what a Registry needs.
type Config struct {
	// URL is the base of the Confluent-compatible API, such as
	// http://registry:8081 or Apicurio's http://apicurio:8080/apis/ccompat/v7.
	URL string
	// User and Password are basic auth credentials; empty User: none.
	// The password is never logged.
	User, Password string
	// TLS names the CA that signs the registry's certificate and a client
	// certificate, for an https:// URL; nil: the system's roots, no client
	// certificate.
	TLS *tlsfiles.Files
	// Documents are the contracts, registered byte for byte: a registry
	// reads one without $schema as its own default draft (Confluent's:
	// draft-07), not as 2020-12 as package contract does.
	Documents Documents
	Logger    *slog.Logger
}

// refusalTTL is how long a refused registration is remembered: every
// event of its subject is dead-lettered without asking the registry
// again meanwhile, and asked again after, so that a subject whose
// compatibility rule was relaxed, or whose versions were deleted, takes
// events again without a restart.
const refusalTTL = time.Minute

// A registration that got no answer (or a 5xx) is made again after a
// backoff from retryMin doubling to retryMax; uses meanwhile get its
// failure at once.
const retryMin, retryMax = 100 * time.Millisecond, 5 * time.Second

// Registry registers each contract on its first use under a topic and
// frames values with its id. It is safe for concurrent use, and meant to
// be shared by every writer of a process (a session's and a backfill's):
// a subject is registered once per process. Close ends it.
type Registry struct {
	c    *client
	docs Documents
	log  *slog.Logger

	// Registrations run in goroutines of their own, not bounded by the
	// context of the use that started them: the stream cuts a publish
	// short at every status deadline (20 ms by default), and a
	// registration that took longer would never finish.
	base  context.Context
	stop  context.CancelFunc
	owned sync.WaitGroup

	mu     sync.Mutex
	ids    map[subjectKey]*registration
	closed bool

	down atomic.Bool // registrations failing for want of an answer; logged once per outage
}

// subjectKey is a subject's parts, kept apart: two (topic, type) pairs
// may join into one subject name, and must not share an id.
type subjectKey struct{ topic, eventType string }

// Subject is the subject a contract is registered under, after Confluent's
// TopicRecordNameStrategy: the topic, a hyphen, the event type. A topic
// carries several event types, each a subject of its own.
func Subject(topic, eventType string) string { return topic + "-" + eventType }

// registration is one subject's, in progress until ready closes; then id
// or err holds its outcome. A success is kept for the process's life; a
// failure until until, when the next use asks again.
type registration struct {
	ready   chan struct{}
	id      uint32
	err     error
	until   time.Time
	attempt int // registrations in a row that got no answer, this one's before it
}

// New returns a Registry for cfg; the registry is not asked anything yet.
func New(cfg Config) (*Registry, error) {
	c, err := newClient(cfg.URL, cfg.User, cfg.Password, cfg.TLS)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &Registry{c: c, docs: cfg.Documents, log: log, ids: map[subjectKey]*registration{}}
	r.base, r.stop = context.WithCancel(context.Background())
	return r, nil
}

// Frame returns the record value of payload, an event of eventType routed
// to topic: payload in the wire format, framed with the id of eventType's
// contract under Subject(topic, eventType), registered first if this
// process has not yet; payload itself when the type has no contract. A
// failure is an *Error (see Retriable and Refused), or ctx's end.
func (r *Registry) Frame(ctx context.Context, topic, eventType string, payload []byte) ([]byte, error) {
	doc, ok := r.docs.Document(eventType)
	if !ok {
		return payload, nil
	}
	id, err := r.id(ctx, subjectKey{topic, eventType}, doc)
	if err != nil {
		return nil, err
	}
	return Framed(id, payload), nil
}

// Framed is payload in the Confluent wire format: magic byte 0, the schema
// id (4 bytes, big-endian), payload unchanged.
func Framed(id uint32, payload []byte) []byte {
	out := make([]byte, 5+len(payload))
	binary.BigEndian.PutUint32(out[1:5], id)
	copy(out[5:], payload)
	return out
}

// Unframed splits a value in the wire format into its schema id and
// payload; ok is false when value is not in it.
func Unframed(value []byte) (id uint32, payload []byte, ok bool) {
	if len(value) < 5 || value[0] != 0 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint32(value[1:5]), value[5:], true
}

// id returns k's schema id, registering doc when no use before has, or
// when the last registration failed and its time to ask again has come. Of
// concurrent uses one registration is made; each use waits for it, or for
// its own ctx.
func (r *Registry) id(ctx context.Context, k subjectKey, doc []byte) (uint32, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, &Error{Subject: Subject(k.topic, k.eventType), Err: errors.New("registry client closed")}
	}
	reg := r.ids[k]
	if reg == nil || reg.settled() && reg.err != nil && !time.Now().Before(reg.until) {
		next := &registration{ready: make(chan struct{})}
		if reg != nil && reg.outage() {
			next.attempt = reg.attempt + 1
		}
		reg = next
		r.ids[k] = reg
		r.owned.Go(func() { r.register(k, doc, reg) })
	}
	r.mu.Unlock()
	select {
	case <-reg.ready:
		return reg.id, reg.err
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for subject %s's registration: %w", Subject(k.topic, k.eventType), context.Cause(ctx))
	}
}

// Close abandons the registrations under way and waits for them to end.
// It is safe to call twice.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.owned.Wait()
}

func (g *registration) settled() bool {
	select {
	case <-g.ready:
		return true
	default:
		return false
	}
}

// outage says g failed for want of an answer.
func (g *registration) outage() bool {
	var e *Error
	return errors.As(g.err, &e) && e.Retriable()
}

// register asks the registry for k's id and settles reg with the answer.
func (r *Registry) register(k subjectKey, doc []byte, reg *registration) {
	subject := Subject(k.topic, k.eventType)
	id, err := r.c.register(r.base, subject, doc)
	reg.id, reg.err = id, err
	switch {
	case err == nil:
		if r.down.CompareAndSwap(true, false) {
			r.log.Info("schema registry answering again", slog.String("schema_registry", r.c.base))
		}
		r.log.Info("registered a contract", slog.String("subject", subject), slog.Uint64("schema_id", uint64(id)))
	case reg.outage():
		reg.until = time.Now().Add(backoff.Delay(reg.attempt, retryMin, retryMax))
		if r.base.Err() == nil && r.down.CompareAndSwap(false, true) {
			r.log.Warn("schema registry unavailable; events of new subjects wait, retrying until it answers",
				slog.String("schema_registry", r.c.base), slog.Any("err", err))
		}
	default:
		var e *Error
		if errors.As(err, &e) && e.Refused() {
			reg.until = time.Now().Add(refusalTTL)
			r.log.Warn("schema registry refused a contract; its events are invalid (reason schema_registry_refused)",
				slog.String("subject", subject), slog.Any("err", err), slog.Duration("asked_again_after", refusalTTL))
		}
		// Anything else (credentials, URL) stops the stream, which asks
		// again when it starts over.
	}
	close(reg.ready)
}
