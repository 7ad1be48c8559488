package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	relaymetrics "github.com/outbox-cdc/outbox-cdc/metrics"
)

// TestAlertsOnPrometheus runs deploy/prometheus/alerts.yml in a real
// Prometheus scraping two relays on one slot, one streaming and one
// standing by, under a steady trickle of rows. The rules are the file's,
// with each `for` cut to 3 s and the lag threshold to 64 KiB so that the
// test takes seconds; the expressions are unchanged.
//
//   - Healthy: no alert fires (not NotStreaming, not NoStandby, not
//     SlotHealed: the last heal's time is 0 before any).
//   - The streaming relay frozen (SIGSTOP: it holds the slot and relays
//     nothing): NotStreaming fires, and SlotLagHigh fires from the
//     standby's reading of the slot while rows keep coming.
//   - The frozen relay killed: the standby takes over and NotStreaming
//     resolves; then it is stopped too and NotStreaming fires again.
func TestAlertsOnPrometheus(t *testing.T) {
	slowFault(t) // 24 s: make test-faults runs it, to keep make test under 10 minutes
	o := newOutbox(t, "alerts", defaultColumns)
	args := o.args("--heartbeat-interval", "1s")
	first := startRelay(t, args...)
	second := startRelay(t, args...)
	firstAddr, secondAddr := first.HTTPAddr(t), second.HTTPAddr(t)

	rules, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	fast := regexp.MustCompile(`(?m)^(\s+)for: \S+$`).ReplaceAllString(string(rules), "${1}for: 3s")
	fast = strings.Replace(fast, "outbox_cdc_slot_lag_bytes{job=\"outbox-cdc\"}) > 1073741824", "outbox_cdc_slot_lag_bytes{job=\"outbox-cdc\"}) > 65536", 1)
	if fast == string(rules) || !strings.Contains(fast, "> 65536") {
		t.Fatalf("could not shorten the rules")
	}
	prom, err := testkit.StartPrometheus(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: outbox-cdc
    static_configs:
      - targets: [%q, %q]
`, firstAddr, secondAddr), map[string]string{"alerts.yml": fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", testkit.Tail(prom.Log(), 20))
		}
		_ = prom.Stop()
	})

	w := &trickle{db: o.db, table: o.name, next: map[string]int{}}
	stop := w.start()
	defer func() { stop() }()
	consumeN(t, o.name+".order", 200, time.Minute)
	// Healthy, once both targets have been scraped for longer than the
	// rules' `for`.
	waitAlerts(t, prom, 30*time.Second, "both relays scraped", func(a map[string]string, up int) bool { return up == 2 })
	time.Sleep(5 * time.Second)
	healthy := alerts(t, prom)
	for _, name := range []string{"OutboxCDCNotStreaming", "OutboxCDCNoStandby", "OutboxCDCSlotLagHigh", "OutboxCDCInstanceDown", "OutboxCDCSlotHealed"} {
		if s, ok := healthy[name]; ok {
			t.Errorf("healthy, yet %s is %s", name, s)
		}
	}

	frozen := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.cmd.Process.Signal(syscall.SIGCONT) })
	waitAlerts(t, prom, 40*time.Second, "NotStreaming and SlotLagHigh fire with the streaming relay frozen", func(a map[string]string, _ int) bool {
		return a["OutboxCDCNotStreaming"] == "firing" && a["OutboxCDCSlotLagHigh"] == "firing"
	})
	t.Logf("frozen relay: NotStreaming and SlotLagHigh firing %s after SIGSTOP", time.Since(frozen).Round(time.Millisecond))

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	killed := time.Now()
	waitAlerts(t, prom, 40*time.Second, "NotStreaming resolved once the standby took over", func(a map[string]string, _ int) bool {
		_, notStreaming := a["OutboxCDCNotStreaming"]
		return !notStreaming
	})
	t.Logf("standby took over: NotStreaming resolved %s after the kill", time.Since(killed).Round(time.Millisecond))

	if code := second.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	stopped := time.Now()
	waitAlerts(t, prom, 30*time.Second, "NotStreaming fires with no relay running", func(a map[string]string, up int) bool {
		return a["OutboxCDCNotStreaming"] == "firing" && up == 0
	})
	t.Logf("no relay: NotStreaming firing %s after the last one stopped", time.Since(stopped).Round(time.Millisecond))
}

// alerts returns Prometheus's alerts (/api/v1/alerts) by name: pending or
// firing.
func alerts(t *testing.T, p *testkit.Prometheus) map[string]string {
	t.Helper()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	promGet(t, p, "/api/v1/alerts", &body)
	out := map[string]string{}
	for _, a := range body.Data.Alerts {
		if out[a.Labels["alertname"]] != "firing" {
			out[a.Labels["alertname"]] = a.State
		}
	}
	return out
}

// targetsUp counts the scrape targets Prometheus sees up.
func targetsUp(t *testing.T, p *testkit.Prometheus) int {
	t.Helper()
	var body struct {
		Data struct {
			ActiveTargets []struct{ Health string }
		}
	}
	promGet(t, p, "/api/v1/targets", &body)
	n := 0
	for _, tg := range body.Data.ActiveTargets {
		if tg.Health == "up" {
			n++
		}
	}
	return n
}

func promGet(t *testing.T, p *testkit.Prometheus, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + path)
	if err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
}

// waitAlerts polls the alerts and the targets up until cond holds.
func waitAlerts(t *testing.T, p *testkit.Prometheus, timeout time.Duration, what string, cond func(alerts map[string]string, up int) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		a, up := alerts(t, p), targetsUp(t, p)
		if cond(a, up) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not so after %s: %s (alerts %v, %d targets up)", timeout, what, a, up)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := testkit.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// metricName matches the metric names in a PromQL expression that a
// Prometheus server or the relay's process could export.
var metricName = regexp.MustCompile(`\b(outbox_cdc_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+|up)\b`)

// TestDashboardAndAlertsUseExportedMetrics scrapes a running relay that has
// published events and dead-lettered one, and holds every metric name in
// deploy/grafana/outbox-cdc.json and deploy/prometheus/alerts.yml to it:
// the dashboard and the alerts cannot drift from the code. A family that
// only appears once something happens (a produce error, a backfill, a
// partition count change) must at least be one the relay declares.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	o := newOutbox(t, "names", defaultColumns)
	r := startRelay(t, o.args()...)
	ctx := context.Background()
	if err := o.insertTx(ctx, []row{
		{ID: "00000000-0000-4000-8000-000000000001", AggregateType: "order", AggregateID: "a", EventType: "e", Payload: `{}`},
		{ID: "00000000-0000-4000-8000-000000000002", AggregateType: "bad type!", AggregateID: "a", EventType: "e", Payload: `{}`},
	}, true); err != nil {
		t.Fatal(err)
	}
	consumeN(t, o.name+".order", 1, time.Minute)
	addr := r.HTTPAddr(t)
	scraped := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for !scraped["outbox_cdc_events_dead_lettered_total"] || !scraped["outbox_cdc_events_published_total"] || !scraped["outbox_cdc_slot_lag_bytes"] {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not export its dead letter, its publication and its slot within 30s: %v", slices.Sorted(maps.Keys(scraped)))
		}
		time.Sleep(200 * time.Millisecond)
		m, _ := testkit.Scrape(t, addr)
		for series := range m {
			name, _, _ := strings.Cut(series, "{")
			scraped[name] = true
		}
	}
	declared := declaredMetrics(t)

	uses := map[string][]string{}
	for _, f := range []string{"deploy/grafana/outbox-cdc.json", "deploy/prometheus/alerts.yml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range metricName.FindAllString(string(b), -1) {
			if !slices.Contains(uses[name], f) {
				uses[name] = append(uses[name], f)
			}
		}
	}
	if len(uses) < 20 {
		t.Fatalf("found %d metric names in the dashboard and the alerts", len(uses))
	}
	var onlyDeclared []string
	for name, files := range uses {
		switch {
		case name == "up" || scraped[name]:
		case declared[strings.TrimSuffix(name, "_bucket")]:
			onlyDeclared = append(onlyDeclared, name)
		default:
			t.Errorf("%v use %s, which the relay does not export", files, name)
		}
	}
	slices.Sort(onlyDeclared)
	t.Logf("%d metric names used, all exported; not in this scrape but declared by the relay: %v", len(uses), onlyDeclared)
}

// declaredMetrics are the names of every metric the metrics package registers.
func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{}
	if _, err := relaymetrics.New("test", rec, relaymetrics.Live{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range rec.cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fq.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}

// recorder is a prometheus.Registerer that keeps what is registered.
type recorder struct{ cs []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error { r.cs = append(r.cs, c); return nil }
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.cs = append(r.cs, cs...)
}
func (r *recorder) Unregister(prometheus.Collector) bool { return false }
