package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestContractViolationsBounded: violations are counted by event type, and
// the series stop growing at the default label limit, whatever
// --max-topics says: later types are counted under OtherTopic.
func TestContractViolationsBounded(t *testing.T) {
	m, err := New("test", prometheus.NewRegistry(), Live{})
	if err != nil {
		t.Fatal(err)
	}
	m.LimitTopics(DefaultTopicLabels + 5000) // the topics' limit, not the event types'
	m.ContractViolated("OrderPlaced")
	m.ContractViolated("OrderPlaced")
	for i := range DefaultTopicLabels + 10 {
		m.ContractViolated(fmt.Sprintf("Type%d", i))
	}
	if got := testutil.ToFloat64(m.violations.WithLabelValues("OrderPlaced")); got != 2 {
		t.Errorf("OrderPlaced: %v violations, want 2", got)
	}
	if n := testutil.CollectAndCount(m.violations); n != DefaultTopicLabels+1 {
		t.Errorf("%d series, want %d event types and %q", n, DefaultTopicLabels, OtherTopic)
	}
	if got := testutil.ToFloat64(m.violations.WithLabelValues(OtherTopic)); got != 11 {
		t.Errorf("violations under %q: %v, want 11", OtherTopic, got)
	}
}

// TestContractOverBudgetCounted: payloads too costly to check are counted
// by event type, apart from violations.
func TestContractOverBudgetCounted(t *testing.T) {
	m, err := New("test", prometheus.NewRegistry(), Live{})
	if err != nil {
		t.Fatal(err)
	}
	m.ContractOverBudget("OrderPlaced")
	if got := testutil.ToFloat64(m.overBudget.WithLabelValues("OrderPlaced")); got != 1 {
		t.Errorf("OrderPlaced: %v over budget, want 1", got)
	}
	if n := testutil.CollectAndCount(m.violations); n != 0 {
		t.Errorf("%d violation series, want none", n)
	}
}
