package packaging

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// kustomize renders deploy/kubernetes, run as a Go tool at a pinned
// version: nothing to install, and the module's checksum is verified like
// any dependency's, yet go.mod does not carry kustomize's dependencies.
// v5.8.3 needs Go 1.27; kubectl embeds its own kustomize (v5 since kubectl
// 1.27), and components need kustomize 3.7 or newer.
const kustomize = "sigs.k8s.io/kustomize/kustomize/v5@v5.8.2"

// builtinAPIs are the API versions of the base's kinds, which every
// cluster serves without a CRD.
var builtinAPIs = map[string]bool{"v1": true, "apps/v1": true, "policy/v1": true}

// object is one rendered Kubernetes object: the fields the checks read,
// and the whole of it.
type object struct {
	manifest
	raw map[string]any
}

// renderKustomize runs `kustomize build` on dir (from the repository's
// root) and returns its objects by kind.
func renderKustomize(t *testing.T, dir string) map[string]object {
	t.Helper()
	cmd := exec.Command("go", "run", kustomize, "build", filepath.Join(root(t), dir))
	cmd.Dir = t.TempDir() // outside the module: its go.mod plays no part
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run %s build %s: %v\n%s", kustomize, dir, err, stderr.String())
	}
	objects := map[string]object{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		var o object
		if err := n.Decode(&o.manifest); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		if err := n.Decode(&o.raw); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		if _, dup := objects[o.Kind]; dup {
			t.Errorf("kustomize build %s: two objects of kind %s", dir, o.Kind)
		}
		objects[o.Kind] = o
	}
	return objects
}

// checkKinds checks that a render holds exactly these kinds.
func checkKinds(t *testing.T, objects map[string]object, kinds ...string) {
	t.Helper()
	var got []string
	for kind := range objects {
		got = append(got, kind)
	}
	slices.Sort(got)
	if !slices.Equal(got, kinds) {
		t.Fatalf("rendered kinds %v, want %v", got, kinds)
	}
}

// checkListed checks that a kustomization under deploy/kubernetes lists
// every YAML file beside it: one left out is silently not applied.
func checkListed(t *testing.T, dir string) {
	t.Helper()
	var k manifest
	readYAML(t, filepath.Join(root(t), dir, "kustomization.yaml"), &k)
	files, err := filepath.Glob(filepath.Join(root(t), dir, "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("%s: %d YAML files (%v)", dir, len(files), err)
	}
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			t.Errorf("%s/kustomization.yaml does not list %s", dir, name)
		}
	}
}

// checkServiceMonitor checks that the ServiceMonitor scrapes the Service's
// port at /metrics under the job the alert rules select.
func checkServiceMonitor(t *testing.T, ms map[string]object) {
	t.Helper()
	sm, svc := ms["ServiceMonitor"], ms["Service"]
	for k, v := range sm.selector() {
		if svc.Metadata.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the Service does not carry", k, v)
		}
	}
	if eps := sm.Spec.Endpoints; len(eps) != 1 || len(svc.Spec.Ports) != 1 || eps[0].Port != svc.Spec.Ports[0].Name || eps[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor's endpoint %+v does not scrape the Service's port %+v at /metrics", eps, svc.Spec.Ports)
	}
	// Without jobLabel, the Prometheus Operator names the job after the
	// Service.
	job := svc.Metadata.Name
	if sm.Spec.JobLabel != "" {
		job = svc.Metadata.Labels[sm.Spec.JobLabel]
	}
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`job="([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
		if m[1] != job {
			t.Fatalf("deploy/prometheus/alerts.yml selects job=%q; the ServiceMonitor's targets are job %q", m[1], job)
		}
	}
}

// checkPrometheusRule checks that the PrometheusRule holds
// deploy/prometheus/alerts.yml's groups, which promtool tests.
func checkPrometheusRule(t *testing.T, ms map[string]object) {
	t.Helper()
	var alerts struct {
		Groups any `yaml:"groups"`
	}
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "alerts.yml"), &alerts)
	if alerts.Groups == nil || !reflect.DeepEqual(ms["PrometheusRule"].Spec.Groups, alerts.Groups) {
		t.Errorf("deploy/kubernetes/components/prometheus-operator/prometheusrule.yaml's spec.groups differ from deploy/prometheus/alerts.yml's groups: " +
			"copy alerts.yml from its groups: line on under spec:, indented by two spaces")
	}
}
