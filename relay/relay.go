package relay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-cdc/outbox-cdc/delivery"
	"github.com/outbox-cdc/outbox-cdc/internal/configerr"
	"github.com/outbox-cdc/outbox-cdc/internal/outage"
	"github.com/outbox-cdc/outbox-cdc/metrics"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Relay streams one slot's outbox events to Kafka. Build it with New, run it
// with Run; Ready may be called from any goroutine, before, during and after
// Run.
type Relay struct {
	cfg      Config
	target   slot.Target
	admit    sink.Admission // each table's route, the messages', the reserved topics
	security sink.Security
	contract sink.Contracts // the payload contracts; nil: not checked
	registry sink.Registry  // frames values with the contracts' schema ids; nil: none
	log      *slog.Logger
	metrics  *metrics.Metrics
	live     live
	ready    *readiness
	version  string
	ran      atomic.Bool
	notifier Notifier      // nil: nobody is told (WithNotifier)
	watchdog time.Duration // the notifier's watchdog interval; 0: none

	// outage follows exactly-once's Kafka requests across sessions, so
	// that an outage a session does not outlive is still one warning.
	outage *outage.Tracker
	// delivery is the delivery mode, wired once (newDelivery).
	delivery delivery.Mode
	// served is the server the last heal decision found (system
	// identifier and timeline), with --on-slot-lost heal: a slot missing
	// after a session on a server that is no longer that one went with a
	// failover or a restore (slot.LossMissing), not a drop. Written and
	// read by the run loop only.
	served *replication.System
}

// An Option changes how New builds a Relay.
type Option func(*options)

type options struct {
	log      *slog.Logger
	reg      prometheus.Registerer
	version  string
	notifier Notifier
	watchdog time.Duration
}

// WithLogger sends the relay's logs to log instead of slog.Default().
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// WithRegisterer registers the relay's metrics (every outbox_cdc_* series
// that `outbox-cdc run` exports on /metrics) with reg; without it they are
// kept in a registry nobody reads. Two relays in one process need distinct
// registerers, or one wrapped with prometheus.WrapRegistererWithPrefix.
func WithRegisterer(reg prometheus.Registerer) Option { return func(o *options) { o.reg = reg } }

// WithVersion names the build in the starting log line and in
// outbox_cdc_build_info; default "embedded".
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// New checks cfg (Default is a starting point) and returns a relay ready to
// Run. It reads local files only (TLS files, the contracts, compiled
// here once): an unreachable server is reported by Run. A configuration
// mistake, a contract that does not compile among them, is a *ConfigError.
func New(cfg Config, opts ...Option) (*Relay, error) {
	o := options{log: slog.Default(), version: "embedded"}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{cfg: cfg, target: cfg.Target(), log: o.log, version: o.version, outage: outage.New(o.log),
		notifier: o.notifier, watchdog: o.watchdog}
	var err error
	if r.admit, err = cfg.Admission(o.log); err != nil { // one cap for every session and the backfill
		return nil, err
	}
	if r.security, err = cfg.Security(); err != nil {
		return nil, err
	}
	if r.contract, err = cfg.Contracts.contracts(); err != nil {
		return nil, configerr.In("Contracts", err)
	}
	if r.registry, err = cfg.Contracts.registry(r.contract, o.log); err != nil {
		return nil, configerr.In("Contracts", err)
	}
	r.metrics, err = metrics.New(o.version, o.reg, metrics.Live{
		InFlight: r.live.inFlight, Confirmed: r.live.confirmed, Received: r.live.received, Streaming: r.live.streaming.Load,
		StandingBy: r.live.standingBy.Load,
	})
	if err != nil {
		return nil, err
	}
	r.metrics.LimitTopics(cfg.Topics.Max)
	if r.delivery, err = r.newDelivery(); err != nil {
		return nil, err
	}
	r.ready = &readiness{r: r}
	r.live.polled.base = time.Now()
	return r, nil
}

// Run streams until ctx ends, then drains: it waits up to the drain timeout
// for the events in flight to be acknowledged, confirms what was, and
// returns nil. It returns an error at once when the first connection to
// Postgres or Kafka fails, or the configuration does not fit the database
// (slot.ErrNotReady, slot.ErrColumnMissing).
//
// Later failures start a new session from the slot's confirmed position,
// after a backoff of 1 s doubling to 30 s, and each failure is asked whether
// that can help (each package's errors answer a Retriable method): one that says no
// (a row that may not be skipped with --on-invalid=fail, an invalidated
// slot, a table no longer fit) is returned; the network's or a server's
// unavailability (a connection refused or cut, Postgres restarting, a
// broker away) is retried for as long as it lasts, an hour's outage
// included. An error nobody classified is retried too, but logged at error
// level with its Go type; after 10 of them in a row, with no session that
// began streaming in between, Run returns it, so that the process exits
// non-zero and its supervisor restarts it visibly rather than the relay
// retrying for ever in silence. Run may be called once.
func (r *Relay) Run(ctx context.Context) error {
	if !r.ran.CompareAndSwap(false, true) {
		return errors.New("relay: Run called twice")
	}
	if c, ok := r.registry.(interface{ Close() }); ok {
		defer c.Close() // registrations under way, once every writer is closed
	}
	if r.notifier != nil {
		defer r.tell(ctx)()
	}
	return r.run(ctx)
}

// Ready returns nil while the relay streams its slot and the brokers answer
// a metadata request (asked at most once a second); otherwise what is
// missing: starting, reconnecting, standing by for another instance that
// holds the slot, or Kafka unreachable. It is what `outbox-cdc run` answers
// on /readyz.
func (r *Relay) Ready(ctx context.Context) error { return r.ready.check(ctx) }

// Probe is Ready, but with standbyOK an instance standing by (another
// process streams the slot) whose brokers answer is ready as well: for an
// orchestrator, a healthy standby is a replica working as intended, and
// one that never became ready would stall rollouts and drains.
func (r *Relay) Probe(ctx context.Context, standbyOK bool) error {
	if standbyOK && r.live.standingBy.Load() {
		return r.ready.kafkaReachable(ctx)
	}
	return r.ready.check(ctx)
}
