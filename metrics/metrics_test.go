package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTopicSeriesBounded: the series by topic stop growing at the label
// limit; later topics are counted under OtherTopic, so no event goes
// uncounted, and topics with a series of their own keep it.
func TestTopicSeriesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New("test", reg, Live{})
	if err != nil {
		t.Fatal(err)
	}
	m.LimitTopics(10) // below the default: the default stands
	const topics = DefaultTopicLabels + 500
	for i := range topics {
		m.Acked(fmt.Sprintf("t%d", i), []time.Time{{}, {}})
		m.PartitionsChanged(fmt.Sprintf("t%d", i))
	}
	m.Acked("t0", []time.Time{{}}) // in use: its own series
	for name, vec := range map[string]*prometheus.CounterVec{"published": m.published, "resized": m.resized} {
		if n := testutil.CollectAndCount(vec); n != DefaultTopicLabels+1 {
			t.Errorf("%s: %d series, want %d topics and %q", name, n, DefaultTopicLabels, OtherTopic)
		}
	}
	if got := testutil.ToFloat64(m.resized.WithLabelValues(OtherTopic)); got != 500 {
		t.Errorf("partition changes under %q: %v, want 500", OtherTopic, got)
	}
	if got := testutil.ToFloat64(m.published.WithLabelValues(OtherTopic)); got != 1000 {
		t.Errorf("events published under %q: %v, want 1000", OtherTopic, got)
	}
	if got := testutil.ToFloat64(m.published.WithLabelValues("t0")); got != 3 {
		t.Errorf("events published to t0: %v, want 3", got)
	}
	if got, want := m.Published(), uint64(2*topics+1); got != want {
		t.Errorf("Published() = %d, want every topic's events, %d", got, want)
	}

	m2, _ := New("test", prometheus.NewRegistry(), Live{})
	m2.LimitTopics(DefaultTopicLabels + 1000) // a larger --max-topics raises it
	for i := range DefaultTopicLabels + 1000 {
		if v := m2.topics.value(fmt.Sprintf("t%d", i)); v == OtherTopic {
			t.Fatalf("topic %d of a limit of %d counted as %s", i, DefaultTopicLabels+1000, OtherTopic)
		}
	}
}

// TestRowHeadersRenamed: renamed row headers are counted, however many an
// event had.
func TestRowHeadersRenamed(t *testing.T) {
	m, err := New("test", prometheus.NewRegistry(), Live{})
	if err != nil {
		t.Fatal(err)
	}
	m.RowHeadersRenamed(2)
	m.RowHeadersRenamed(1)
	if got := testutil.ToFloat64(m.renamed); got != 3 {
		t.Errorf("%v row headers renamed, want 3", got)
	}
}

// TestTransactionTimeoutsExported: the count of Kafka transactions aborted
// by the transaction timeout is exported at 0 from the start, so that an
// alert's increase() sees the first one, and counts each.
func TestTransactionTimeoutsExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New("test", reg, Live{InFlight: func() (int, int64) { return 0, 0 }, Confirmed: func() pglogrepl.LSN { return 0 },
		Received: func() pglogrepl.LSN { return 0 }, Streaming: func() bool { return false }, StandingBy: func() bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	const name = "outbox_cdc_transaction_timeouts_total"
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
		t.Fatalf("%s before any timeout: %d series (%v), want 1", name, n, err)
	}
	m.TransactionTimedOut()
	m.TransactionTimedOut()
	if got := testutil.ToFloat64(m.txnTimeouts); got != 2 {
		t.Errorf("%s: %v, want 2", name, got)
	}
}
