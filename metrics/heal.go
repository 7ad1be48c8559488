package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// healMetrics count the heals of a lost slot (--on-slot-lost heal).
type healMetrics struct {
	heals *prometheus.CounterVec // by cause
	rows  prometheus.Counter     // rows the heals published again
	last  prometheus.Gauge       // unix seconds of the last heal's end
}

// newHealMetrics builds the heal metrics, each cause's counter at 0: an
// alert on increase() sees the first heal only if the series was there
// before it.
func newHealMetrics() healMetrics {
	const ns = namespace
	h := healMetrics{
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "slot_heals_total",
			Help: "Heals of a lost replication slot (--on-slot-lost heal) by cause: wal_removed, idle_timeout, invalidated (another invalidation), dropped (while streaming), missing (absent at start: a failover without slot sync, a restore, a drop while stopped)."},
			[]string{"cause"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "slot_heal_rows_total",
			Help: "Outbox rows heals published again from the new slot's snapshot: a heal that ran through gives at-least-once consumers no more duplicates than this (one cut short and resumed may give more)."}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "slot_last_heal_timestamp_seconds",
			Help: "When the last heal of a lost slot by this process ended (unix time); 0 before any."}),
	}
	for _, cause := range slot.Losses {
		h.heals.WithLabelValues(string(cause))
	}
	return h
}

// SlotHealed counts a heal of cause that published rows and ended at end.
func (m *Metrics) SlotHealed(cause slot.Loss, rows int64, end time.Time) {
	m.heal.heals.WithLabelValues(string(cause)).Inc()
	m.heal.rows.Add(float64(rows))
	m.heal.last.Set(float64(end.Unix()))
}
