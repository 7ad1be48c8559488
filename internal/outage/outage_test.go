package outage

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/outage/outagetest"
)

// step is a report to a Tracker at a time into the test: a failure of
// request what, or a success (what empty), and whether it should log.
type step struct {
	at   time.Duration
	what string
	logs bool
}

// TestTrackerLogsOncePerOutage: failures that last less than Grace say
// nothing; an outage is one warning however many failures follow, and
// one recovery line at the first success saying how long it lasted; a
// success in between starts the grace again; a second outage is a second
// pair.
func TestTrackerLogsOncePerOutage(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
		want  []outagetest.Outage
	}{
		{"blip", []step{{0, "EndTxn(commit)", false}, {500 * time.Millisecond, "EndTxn(commit)", false}, {900 * time.Millisecond, "", false}}, nil},
		{"outage", []step{{0, "produce", false}, {500 * time.Millisecond, "produce", false}, {time.Second, "AddPartitionsToTxn", true},
			{1500 * time.Millisecond, "AddPartitionsToTxn", false}, {3 * time.Second, "AddPartitionsToTxn", false}, {3200 * time.Millisecond, "", true}},
			[]outagetest.Outage{{Request: "AddPartitionsToTxn", Lasted: 3200 * time.Millisecond}}},
		{"success restarts the grace", []step{{0, "produce", false}, {800 * time.Millisecond, "", false}, {900 * time.Millisecond, "produce", false},
			{1500 * time.Millisecond, "produce", false}, {2 * time.Second, "produce", true}, {2100 * time.Millisecond, "", true}},
			[]outagetest.Outage{{Request: "produce", Lasted: 1200 * time.Millisecond}}},
		{"two outages", []step{{0, "EndTxn(commit)", false}, {1100 * time.Millisecond, "EndTxn(commit)", true}, {2 * time.Second, "", true},
			{2100 * time.Millisecond, "", false}, {3 * time.Second, "InitProducerID", false}, {4500 * time.Millisecond, "InitProducerID", true},
			{5 * time.Second, "", true}},
			[]outagetest.Outage{{Request: "EndTxn(commit)", Lasted: 2 * time.Second}, {Request: "InitProducerID", Lasted: 2 * time.Second}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &outagetest.Log{}
			tr, clock := New(logs.Logger()), time.Now()
			for _, s := range tc.steps {
				tr.now = func() time.Time { return clock.Add(s.at) }
				var logged bool
				if s.what == "" {
					logged = tr.Succeeded()
				} else {
					logged = tr.Failed(s.what, errors.New("[15] Coordinator Not Available"))
				}
				if logged != s.logs {
					t.Errorf("at %s, %q: logged %v, want %v", s.at, s.what, logged, s.logs)
				}
			}
			logs.Check(t, tc.want...)
		})
	}
}

// TestTrackerFailing: Failing says since when, which request and why,
// once failures have lasted the duration asked, until a success.
func TestTrackerFailing(t *testing.T) {
	tr, clock := New((&outagetest.Log{}).Logger()), time.Now()
	at := func(d time.Duration) { tr.now = func() time.Time { return clock.Add(d) } }
	at(0)
	if _, _, _, failing := tr.Failing(5 * time.Second); failing {
		t.Fatal("failing before any failure")
	}
	tr.Failed("produce", errors.New("first"))
	at(4 * time.Second)
	tr.Failed("EndTxn(commit)", errors.New("[15] Coordinator Not Available"))
	if _, _, _, failing := tr.Failing(5 * time.Second); failing {
		t.Error("failing after 4 s, asked for 5 s")
	}
	at(6 * time.Second)
	since, what, last, failing := tr.Failing(5 * time.Second)
	if !failing || !since.Equal(clock) || what != "EndTxn(commit)" || last != "[15] Coordinator Not Available" {
		t.Errorf("Failing after 6 s = %s, %q, %q, %v; want since the first failure, the last request and its error", since, what, last, failing)
	}
	tr.Succeeded()
	if _, _, _, failing := tr.Failing(0); failing {
		t.Error("failing after a success")
	}
}

// TestTrackerShortError: the warning quotes the error with its passwords
// blanked and cut short.
func TestTrackerShortError(t *testing.T) {
	logs := &outagetest.Log{}
	tr, clock := New(logs.Logger()), time.Now()
	tr.now = func() time.Time { return clock }
	err := errors.New("dial https://user:s3cret@broker:9093 failed: " + strings.Repeat("é", 400))
	tr.Failed("produce", err)
	tr.now = func() time.Time { return clock.Add(Grace) }
	tr.Failed("produce", err)
	out := logs.String()
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "…") || len(out) > 1000 {
		t.Errorf("warning %s: want the password blanked and the error cut", out)
	}
}

// TestTrackerConcurrent: reports from many goroutines (run with -race)
// log at most one warning for one outage.
func TestTrackerConcurrent(t *testing.T) {
	logs := &outagetest.Log{}
	tr, clock := New(logs.Logger()), time.Now()
	tr.now = func() time.Time { return clock }
	tr.Failed("produce", errors.New("down"))
	tr.now = func() time.Time { return clock.Add(2 * Grace) }
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tr.Failed("produce", errors.New("down"))
				tr.Failing(time.Second)
			}
		})
	}
	wg.Wait()
	tr.Succeeded()
	logs.Check(t, outagetest.Outage{Request: "produce", Lasted: 2 * Grace})
}

// A nil Tracker tracks nothing, so that a room without one needs no
// branch.
func TestTrackerNil(t *testing.T) {
	var tr *Tracker
	if tr.Failed("produce", errors.New("down")) || tr.Succeeded() {
		t.Error("a nil Tracker logged")
	}
	if _, _, _, failing := tr.Failing(0); failing {
		t.Error("a nil Tracker is failing")
	}
}

// TestTrackerGrace: NewAfter's tracker warns once failures have lasted its
// grace, shorter or longer than Grace; a grace of zero is Grace.
func TestTrackerGrace(t *testing.T) {
	cases := []struct {
		grace   time.Duration
		quiet   time.Duration // failures this long say nothing
		warnsAt time.Duration
	}{
		{100 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
		{3 * time.Second, 2 * time.Second, 3 * time.Second},
		{0, Grace - time.Millisecond, Grace},
	}
	for _, tc := range cases {
		t.Run(tc.grace.String(), func(t *testing.T) {
			tr, clock := NewAfter((&outagetest.Log{}).Logger(), tc.grace), time.Now()
			at := func(d time.Duration) { tr.now = func() time.Time { return clock.Add(d) } }
			at(0)
			tr.Failed("produce", errors.New("down"))
			at(tc.quiet)
			if tr.Failed("produce", errors.New("down")) {
				t.Errorf("warned after %s, before the grace", tc.quiet)
			}
			at(tc.warnsAt)
			if !tr.Failed("produce", errors.New("down")) {
				t.Errorf("no warning after %s", tc.warnsAt)
			}
		})
	}
}
