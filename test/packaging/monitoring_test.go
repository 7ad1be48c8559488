package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertRules runs promtool's checks and unit tests of
// deploy/prometheus/alerts.yml, and holds the unit tests to a firing and a
// quiet case for every rule.
func TestAlertRules(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "prometheus")
	promtool := tool(t, "promtool", "apt-get install prometheus", "checks and unit-tests deploy/prometheus/alerts.yml")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(dir, "alerts.yml"), &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, filepath.Join(dir, "alerts_test.yml"), &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yml has a firing case %v, a quiet case %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: wants a summary and a description", r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d rules in alerts.yml", n)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDashboardShape checks deploy/grafana/outbox-cdc.json is a dashboard
// Grafana imports: a data source variable that every panel and query uses,
// unique panel ids, an expression in every query. (That the expressions
// only name metrics the relay exports is test/integration's
// TestDashboardAndAlertsUseExportedMetrics, against a running relay.)
func TestDashboardShape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "grafana", "outbox-cdc.json"))
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct{ Type, UID string }
	var d struct {
		Title      string
		UID        string
		Templating struct {
			List []struct{ Name, Type, Query any }
		}
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource *datasource
			Targets    []struct {
				Datasource *datasource
				Expr       string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("outbox-cdc.json: %v", err)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDS = true
		}
	}
	if !hasDS || d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q, datasource variable %v", d.UID, d.Title, hasDS)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			if q.Expr == "" || q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query without an expression or the datasource variable", p.Title)
			}
		}
	}
	if queries < 20 {
		t.Errorf("%d queries in the dashboard", queries)
	}
}
