package metrics

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// Live reads what the running session knows, at scrape time. Each func may
// be called from any goroutine, and returns zeros between sessions.
type Live struct {
	InFlight  func() (events int, bytes int64)
	Confirmed func() pglogrepl.LSN // highest position confirmed to Postgres
	Received  func() pglogrepl.LSN // newest WAL position received
	Streaming func() bool
	// StandingBy is true while another process streams the slot and this
	// one waits to take over.
	StandingBy func() bool
}

// Metrics are the relay's Prometheus metrics. It implements sink.Observer.
type Metrics struct {
	published     *prometheus.CounterVec
	deadLettered  *prometheus.CounterVec
	publishErrors *prometheus.CounterVec
	latency       prometheus.Histogram
	batch         prometheus.Histogram
	requests      prometheus.Counter
	records       prometheus.Counter
	sentBytes     prometheus.Counter
	reconnects    prometheus.Counter
	ghostBytes    prometheus.Counter // WAL of a failed primary's past its successor's branch point
	deleted       prometheus.Counter
	marked        prometheus.Counter
	renamed       prometheus.Counter // row headers renamed (sink.RowHeaderPrefix)
	resized       *prometheus.CounterVec
	backfillTotal *prometheus.GaugeVec
	backfillDone  *prometheus.GaugeVec
	violations    *prometheus.CounterVec
	overBudget    *prometheus.CounterVec
	transactions  *prometheus.CounterVec // exactly-once's Kafka transactions, by outcome
	commitTime    prometheus.Histogram
	txnTimeouts   prometheus.Counter // exactly-once's Kafka transactions aborted by the coordinator's timeout

	slotLag      prometheus.Gauge
	slotRetained prometheus.Gauge
	slotSafe     prometheus.Gauge
	slotActive   prometheus.Gauge
	walStatus    *prometheus.GaugeVec
	slotReadAt   prometheus.Gauge
	heal         healMetrics

	topics     labelValues // the topic label's values
	eventTypes labelValues // the event_type label's values

	// acked counts what published does, every topic together, for a
	// reader in the process (Published): one add per produce request.
	acked atomic.Uint64
}

// DefaultTopicLabels is how many topics get series of their own by
// default; see LimitTopics.
const DefaultTopicLabels = 1000

// OtherTopic is the topic label of every topic beyond the limit, and the
// event_type label of every event type beyond the first 1000.
const OtherTopic = "_other"

// labelValues bounds the values of a label taken from rows (a topic, an
// event type): series are never deleted, so each value a row names would
// otherwise add series for the life of the process. The first values seen
// keep their own; the rest share OtherTopic.
type labelValues struct {
	mu    sync.Mutex
	limit int
	seen  map[string]struct{}
}

func (l *labelValues) value(topic string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[topic]; ok {
		return topic
	}
	if len(l.seen) >= max(l.limit, DefaultTopicLabels) {
		return OtherTopic
	}
	if l.seen == nil {
		l.seen = map[string]struct{}{}
	}
	l.seen[topic] = struct{}{}
	return topic
}

// LimitTopics lets n topics have series of their own, when n is above
// DefaultTopicLabels (a --max-topics above it); the series of any further
// topic are counted under OtherTopic.
func (m *Metrics) LimitTopics(n int) {
	m.topics.mu.Lock()
	m.topics.limit = n
	m.topics.mu.Unlock()
}

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// namespace prefixes every metric name.
const namespace = "outbox_cdc"

// New registers every metric with reg (nil: a registry of its own), with
// live read at scrape time. The Go runtime and process collectors are the
// caller's to register, once per registry.
func New(version string, reg prometheus.Registerer, live Live) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{}
	m.newPipelineMetrics()
	m.newSlotMetrics()
	m.heal = newHealMetrics()
	collectors := append(m.collectors(), liveGauges(live)...)
	collectors = append(collectors, buildInfo(version))
	return m, register(reg, collectors)
}

// register registers every collector, even after one fails, so that one
// clash (a metric already registered by the embedding service) costs only
// that metric; the first error is returned.
func register(reg prometheus.Registerer, collectors []prometheus.Collector) error {
	var first error
	for _, c := range collectors {
		if err := reg.Register(c); err != nil && first == nil {
			first = fmt.Errorf("register metrics: %w", err)
		}
	}
	return first
}

// collectors are the metrics m updates itself, in registration order.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.published, m.deadLettered, m.publishErrors, m.latency, m.batch, m.requests, m.records, m.sentBytes, m.reconnects, m.ghostBytes, m.deleted, m.marked, m.resized, m.backfillTotal, m.backfillDone, m.violations, m.overBudget, m.renamed, m.transactions, m.commitTime, m.txnTimeouts,
		m.slotLag, m.slotRetained, m.slotSafe, m.slotActive, m.walStatus, m.slotReadAt, m.heal.heals, m.heal.rows, m.heal.last}
}

// newPipelineMetrics builds the counters and histograms the pipeline
// updates as events flow: sink.Observer's, cleanup's and backfill's.
func (m *Metrics) newPipelineMetrics() {
	const ns = namespace
	m.published = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_published_total",
		Help: "Events acknowledged by Kafka (acks=all), by topic (beyond the first 1000 topics, or --max-topics, under topic=\"_other\"). Dead letters are counted in outbox_cdc_events_dead_lettered_total instead."}, []string{"topic"})
	m.deadLettered = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_dead_lettered_total",
		Help: "Outbox rows sent to the dead-letter topic, by reason (null_column, message_too_large, invalid_topic, topic_not_allowed, topic_limit, …)."}, []string{"reason"})
	m.publishErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "publish_errors_total",
		Help: "Failed produce attempts, each retried or settled, by kind (a Kafka error name, timeout or network)."}, []string{"kind"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "event_latency_seconds",
		Help:    "Time from an event's commit in Postgres (its commit timestamp) to its acknowledgement by Kafka.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 17)})
	m.batch = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "produce_batch_messages",
		Help: "Records per produce request, over every partition it carried.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)})
	m.requests = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "produce_requests_total",
		Help: "Produce requests sent to Kafka (each carries a batch of every partition of one broker that had records waiting)."})
	m.records = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "produce_records_total",
		Help: "Records sent in produce requests, retries and dead letters included; divided by outbox_cdc_produce_requests_total, the batching."})
	m.sentBytes = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "kafka_sent_bytes_total",
		Help: "Bytes written to Kafka connections (after compression and TLS)."})
	m.reconnects = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "reconnects_total",
		Help: "Replication sessions restarted after a failure (a lost connection, Kafka away too long)."})
	m.ghostBytes = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "failover_ghost_bytes_total",
		Help: "Exactly-once: bytes of WAL a failed primary wrote past the point its promoted successor branched, whose transactions Kafka holds and no database does from then on (the log's warning names the LSN range to reconcile). 0 with synchronized_standby_slots."})
	m.deleted = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "rows_deleted_total",
		Help: "Outbox rows deleted after their events were acknowledged (--cleanup=delete-after-publish)."})
	m.marked = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "rows_marked_total",
		Help: "Outbox rows updated after their events were acknowledged or dead-lettered (--cleanup=mark)."})
	m.backfillTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "backfill_rows",
		Help: "Rows the backfill (--backfill-where) publishes, by outbox table."}, []string{"table"})
	m.backfillDone = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "backfill_done_rows",
		Help: "Backfilled rows acknowledged by Kafka (with every one before them), by outbox table."}, []string{"table"})
	m.resized = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "partition_count_changes_total",
		Help: "Times a topic's partition count was seen to change (events queued under the old count are delivered before keys are routed by the new one), by topic (as outbox_cdc_events_published_total's)."}, []string{"topic"})
	m.transactions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "kafka_transactions_total",
		Help: "Kafka transactions of --delivery exactly-once that ended, by outcome: committed, or failed (aborted, or left to the next session's InitProducerID, which aborts it)."}, []string{"outcome"})
	m.commitTime = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "kafka_commit_seconds",
		Help:    "Time a Kafka commit of --delivery exactly-once holds publishing back: the last acknowledgements, the checkpoint record, EndTxn.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	m.txnTimeouts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "transaction_timeouts_total",
		Help: "Kafka transactions of exactly-once that the broker aborted past --transaction-timeout (judged by the relay: refused for its epoch or state after being open that long); the same Postgres transaction aborted twice stops the relay."})
	m.renamed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "row_headers_renamed_total",
		Help: "Headers of outbox rows (the headers column, header columns) named as headers the relay writes (outbox_cdc.*, id, event_type, aggregate_type; ce_* and content-type under the CloudEvents envelopes, in any case), sent renamed to x-row-<name> instead."})
	m.violations = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "contract_violations_total",
		Help: "Payloads their event type's contract (--contracts) refused, each dead-lettered with reason contract_violation, by event type (beyond the first 1000 types, under event_type=\"_other\")."}, []string{"event_type"})
	m.overBudget = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "contract_budget_exceeded_total",
		Help: "Payloads not checked against their event type's contract (--contracts) because checking them would take more steps than their budget (a contract whose anyOf or oneOf recurses), each dead-lettered with reason contract_budget_exceeded, by event type (as outbox_cdc_contract_violations_total's)."}, []string{"event_type"})
}

// newSlotMetrics builds the gauges set from each poll of
// pg_replication_slots (see Slot).
func (m *Metrics) newSlotMetrics() {
	const ns = namespace
	m.slotLag = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "slot_lag_bytes",
		Help: "WAL written since the slot's confirmed flush position (polled from pg_replication_slots)."})
	m.slotRetained = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "slot_retained_wal_bytes",
		Help: "WAL the slot keeps from removal: the current position minus its restart_lsn (polled)."})
	m.slotSafe = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "slot_safe_wal_size_bytes",
		Help: "WAL that can still be written before the slot risks losing what it needs (pg_replication_slots.safe_wal_size); -1 when max_slot_wal_keep_size is unlimited."})
	m.slotActive = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "slot_active",
		Help: "1 when a consumer streams the slot (polled)."})
	m.walStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "slot_wal_status",
		Help: "1 for the slot's current wal_status (reserved, extended, unreserved, lost), 0 for the others."}, []string{"status"})
	m.slotReadAt = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "slot_last_read_timestamp_seconds",
		Help: "When the slot gauges were last read from Postgres (unix time)."})
}

// liveGauges read the running session at scrape time rather than being
// pushed, so a scrape always sees the present window and positions.
func liveGauges(live Live) []prometheus.Collector {
	const ns = namespace
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "in_flight_events",
			Help: "Events handed to Kafka and not yet acknowledged."}, func() float64 { n, _ := live.InFlight(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "in_flight_bytes",
			Help: "Bytes of the events in flight."}, func() float64 { _, b := live.InFlight(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "confirmed_lsn",
			Help: "Highest WAL position confirmed to Postgres as flushed: everything before it is acknowledged by Kafka."},
			func() float64 { return float64(live.Confirmed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "received_lsn",
			Help: "Newest WAL position received from Postgres."}, func() float64 { return float64(live.Received()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "streaming",
			Help: "1 while a replication session streams the slot."}, func() float64 { return boolGauge(live.Streaming()) }),
		// StandingBy is optional: a relay without standby support leaves it nil.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "standing_by",
			Help: "1 while another process streams the slot and this one waits to take over (a standby instance)."},
			func() float64 { return boolGauge(live.StandingBy != nil && live.StandingBy()) }),
	}
}

// buildInfo is the constant gauge whose labels name the build.
func buildInfo(version string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1; labels name the build.", ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}},
		func() float64 { return 1 })
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Acked implements sink.Observer.
func (m *Metrics) Acked(topic string, commits []time.Time) {
	m.published.WithLabelValues(m.topics.value(topic)).Add(float64(len(commits)))
	m.acked.Add(uint64(len(commits)))
	now := time.Now()
	for _, c := range commits {
		if !c.IsZero() {
			m.latency.Observe(max(now.Sub(c).Seconds(), 0))
		}
	}
}

// Published returns how many events Kafka acknowledged, every topic
// together: outbox_cdc_events_published_total's sum.
func (m *Metrics) Published() uint64 { return m.acked.Load() }

// Request implements sink.Observer.
func (m *Metrics) Request(_, records int) {
	m.requests.Inc()
	m.records.Add(float64(records))
	m.batch.Observe(float64(records))
}

// Sent implements sink.Observer.
func (m *Metrics) Sent(n int) { m.sentBytes.Add(float64(n)) }

// DeadLettered implements sink.Observer.
func (m *Metrics) DeadLettered(reason string) { m.deadLettered.WithLabelValues(reason).Inc() }

// PartitionsChanged implements sink.Observer.
func (m *Metrics) PartitionsChanged(topic string) {
	m.resized.WithLabelValues(m.topics.value(topic)).Inc()
}

// ContractViolated implements sink.Observer.
func (m *Metrics) ContractViolated(eventType string) {
	m.violations.WithLabelValues(m.eventTypes.value(eventType)).Inc()
}

// ContractOverBudget implements sink.Observer.
func (m *Metrics) ContractOverBudget(eventType string) {
	m.overBudget.WithLabelValues(m.eventTypes.value(eventType)).Inc()
}

// RowHeadersRenamed implements sink.Observer.
func (m *Metrics) RowHeadersRenamed(n int) { m.renamed.Add(float64(n)) }

// ProduceFailed implements sink.Observer.
func (m *Metrics) ProduceFailed(kind string) { m.publishErrors.WithLabelValues(kind).Inc() }

// Deleted counts outbox rows deleted by --cleanup.
func (m *Metrics) Deleted(n int64) { m.deleted.Add(float64(n)) }

// Marked counts outbox rows marked by --cleanup=mark.
func (m *Metrics) Marked(n int64) { m.marked.Add(float64(n)) }

// Backfill records a backfill's progress.
func (m *Metrics) Backfill(table string, total, done int64) {
	m.backfillTotal.WithLabelValues(table).Set(float64(total))
	m.backfillDone.WithLabelValues(table).Set(float64(done))
}

// Transaction counts a Kafka transaction of exactly-once that ended, and
// how long its commit held publishing back (committed only).
func (m *Metrics) Transaction(committed bool, took time.Duration) {
	if !committed {
		m.transactions.WithLabelValues("failed").Inc()
		return
	}
	m.transactions.WithLabelValues("committed").Inc()
	m.commitTime.Observe(took.Seconds())
}

// TransactionTimedOut counts a Kafka transaction of exactly-once that the
// broker aborted past --transaction-timeout.
func (m *Metrics) TransactionTimedOut() { m.txnTimeouts.Inc() }

// Reconnected counts a session restarted after a failure.
func (m *Metrics) Reconnected() { m.reconnects.Inc() }

// FailoverGhosts counts n bytes of WAL a failed primary wrote past its
// successor's branch point (checkpoint.Ghosts).
func (m *Metrics) FailoverGhosts(n uint64) { m.ghostBytes.Add(float64(n)) }

// Slot records a reading of pg_replication_slots.
func (m *Metrics) Slot(st slot.SlotState) {
	m.slotLag.Set(float64(st.LagBytes))
	m.slotRetained.Set(float64(st.RetainedBytes))
	if st.SafeWALSize != nil {
		m.slotSafe.Set(float64(*st.SafeWALSize))
	} else {
		m.slotSafe.Set(-1)
	}
	active := 0.0
	if st.Active {
		active = 1
	}
	m.slotActive.Set(active)
	for _, s := range walStatuses {
		v := 0.0
		if s == st.WALStatus {
			v = 1
		}
		m.walStatus.WithLabelValues(s).Set(v)
	}
	m.slotReadAt.Set(float64(time.Now().UnixNano()) / 1e9)
}
