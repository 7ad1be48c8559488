package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/metrics"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Relay streams one slot's outbox events to Kafka. Build it with New, run it
// with Run; Ready may be called from any goroutine, before, during and after
// Run.
type Relay struct {
	cfg      config.Config
	target   slot.Target
	topics   map[string]sink.Topic // by table
	topic    sink.Topic            // of events from logical decoding messages
	security sink.Security
	log      *slog.Logger
	metrics  *metrics.Metrics
	live     live
	ready    *readiness
	version  string
	ran      atomic.Bool
}

// An Option changes how New builds a Relay.
type Option func(*options)

type options struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	version string
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

// New checks cfg (see config.Default for a starting point; Command may be
// left empty) and returns a relay ready to Run. It does no I/O: an
// unreachable server is reported by Run. A configuration mistake is a
// *config.UsageError.
func New(cfg config.Config, opts ...Option) (*Relay, error) {
	o := options{log: slog.Default(), version: "embedded"}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Command == "" {
		cfg.Command = config.CmdRun
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{cfg: cfg, target: Target(cfg), log: o.log, topics: map[string]sink.Topic{}, version: o.version}
	var err error
	limit := sink.NewTopicLimit(cfg.MaxTopics, o.log) // one for every session and the backfill
	for _, t := range cfg.Tables {
		topic, err := sink.ParseTopic(t.Topic)
		if err == nil {
			topic, err = topic.Rewrite(t.TopicRegex, t.TopicReplacement)
		}
		if err == nil {
			topic, err = topic.Allow(t.TopicAllow)
		}
		if err != nil {
			return nil, &config.UsageError{Msg: fmt.Sprintf("--topic (table %s): %v", t.Qualified(), err)}
		}
		r.topics[t.Qualified()] = topic.WithSpec(topicSpec(t.Partitions, t.ReplicationFactor, t.TopicConfigs)).Limit(limit)
	}
	if r.topic, err = sink.ParseTopic(cfg.Topic); err == nil {
		r.topic, err = r.topic.Rewrite(cfg.TopicRegex, cfg.TopicReplacement)
	}
	if err == nil {
		r.topic, err = r.topic.Allow(cfg.TopicAllow)
	}
	if err != nil {
		return nil, &config.UsageError{Msg: fmt.Sprintf("--topic: %v", err)}
	}
	r.topic = r.topic.Limit(limit)
	if cfg.OnInvalid == config.OnInvalidDLQ {
		if err := sink.ValidateTopicName(cfg.DeadLetterTopic); err != nil {
			return nil, &config.UsageError{Msg: fmt.Sprintf("--dlq-topic: %v", err)}
		}
	}
	if r.security, err = Security(cfg.Kafka); err != nil {
		return nil, err
	}
	r.metrics, err = metrics.New(o.version, o.reg, metrics.Live{
		InFlight: r.live.inFlight, Confirmed: r.live.confirmed, Received: r.live.received, Streaming: r.live.streaming.Load,
		StandingBy: r.live.standingBy.Load,
	})
	if err != nil {
		return nil, err
	}
	r.metrics.LimitTopics(cfg.MaxTopics)
	r.ready = &readiness{r: r}
	return r, nil
}

// Run streams until ctx ends, then drains: it waits up to the drain timeout
// for the events in flight to be acknowledged, confirms what was, and
// returns nil. It returns an error at once when the first connection to
// Postgres or Kafka fails, or the configuration does not fit the database
// (slot.ErrNotReady, slot.ErrColumnMissing);
// later failures are retried with backoff from the slot's confirmed position
// until one cannot be mended (a row that may not be skipped with
// --on-invalid=fail, an invalidated slot). Run may be called once.
func (r *Relay) Run(ctx context.Context) error {
	if !r.ran.CompareAndSwap(false, true) {
		return errors.New("relay: Run called twice")
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

// Target is the publication, slot and tables cfg names, each table with
// the columns its topic template names.
func Target(cfg config.Config) slot.Target {
	t := slot.Target{Publication: cfg.Publication, Slot: cfg.Slot, Failover: slot.Failover(cfg.SlotFailover)}
	for _, tc := range cfg.Tables {
		tb := tc.Table
		if topic, err := sink.ParseTopic(tc.Topic); err == nil {
			tb.Columns.TopicColumns = topic.Columns()
		}
		t.Tables = append(t.Tables, tb)
	}
	return t
}

// CleanupTables are cfg's tables as --cleanup treats them: deleted, or
// marked by their --mark and --mark-dead (which Validate has parsed).
func CleanupTables(cfg config.Config) []cleanup.Table {
	target := Target(cfg)
	out := make([]cleanup.Table, len(cfg.Tables))
	for i, tc := range cfg.Tables {
		out[i].Table = target.Tables[i]
		if cfg.Cleanup != config.CleanupMark {
			continue
		}
		for _, m := range tc.Mark {
			set, _ := cleanup.ParseSet(m, false)
			out[i].Mark = append(out[i].Mark, set)
		}
		for _, m := range tc.MarkDead {
			set, _ := cleanup.ParseSet(m, true)
			out[i].MarkDead = append(out[i].MarkDead, set)
		}
	}
	return out
}

// topicSpec is how a missing topic is created (configs are KEY=VALUE,
// which Validate has checked).
func topicSpec(partitions, replication int, configs []string) sink.TopicSpec {
	s := sink.TopicSpec{Partitions: partitions, ReplicationFactor: replication}
	for _, kv := range configs {
		if s.Configs == nil {
			s.Configs = map[string]string{}
		}
		k, v, _ := strings.Cut(kv, "=")
		s.Configs[k] = v
	}
	return s
}

// TopicSpec is how cfg creates the topics of messages and the dead-letter
// topic.
func TopicSpec(cfg config.Config) sink.TopicSpec {
	return topicSpec(cfg.TopicPartitions, cfg.TopicReplication, cfg.TopicConfigs)
}

// Security turns the Kafka flags into what sink dials with.
func Security(k config.KafkaSecurity) (sink.Security, error) {
	var s sink.Security
	var err error
	if k.TLS {
		s.TLS, err = sink.NewTLSConfig(sink.TLSFiles{CAFile: k.CAFile, CertFile: k.CertFile, KeyFile: k.KeyFile,
			ServerName: k.ServerName, InsecureSkipVerify: k.InsecureSkipVerify})
		if err != nil {
			return s, err
		}
	}
	s.SASL, err = sink.NewSASL(sink.SASLMechanism(k.SASLMechanism), k.SASLUsername, k.SASLPassword)
	return s, err
}
