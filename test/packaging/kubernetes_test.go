package packaging

import (
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/config"
)

// manifest is the part of a Kubernetes object the checks read.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		// {matchLabels: …} in a Deployment, a PodDisruptionBudget and a
		// ServiceMonitor; the labels themselves in a Service.
		Selector map[string]any `yaml:"selector"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxSurge       any `yaml:"maxSurge"`
				MaxUnavailable any `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service
		ClusterIP                string `yaml:"clusterIP"`
		PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
		Ports                    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		// PodDisruptionBudget
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		// ServiceMonitor
		JobLabel  string `yaml:"jobLabel"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
		// PrometheusRule
		Groups any `yaml:"groups"`
	} `yaml:"spec"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	Containers                    []struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Env   []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom any    `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		StartupProbe   *probe `yaml:"startupProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
	Volumes []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

// selector returns the labels m selects pods (or, for a ServiceMonitor,
// Services) by.
func (m manifest) selector() map[string]string {
	sel := m.Spec.Selector
	if ml, ok := sel["matchLabels"].(map[string]any); ok {
		sel = ml
	}
	out := map[string]string{}
	for k, v := range sel {
		out[k], _ = v.(string)
	}
	return out
}

// TestKubernetesManifests renders deploy/kubernetes with kustomize, as
// `kubectl apply -k` would, both the base and the overlay with the
// Prometheus Operator's component, and holds each render against the
// binary: every OUTBOX_CDC_* variable is one `run` reads and together they
// parse as a configuration; the probes ask the relay's HTTP port for
// /healthz and /readyz; the pod runs as non-root on a read-only root
// filesystem without privilege escalation; secrets arrive as files; the
// Service, the ServiceMonitor and the PodDisruptionBudget select the pods.
// The base holds built-in kinds only, so it applies on a bare cluster.
func TestKubernetesManifests(t *testing.T) {
	base := renderKustomize(t, "deploy/kubernetes")
	t.Run("base", func(t *testing.T) {
		for _, o := range base {
			if !builtinAPIs[o.APIVersion] {
				t.Errorf("the base holds a %s (%s): kubectl apply -k fails on a cluster without its CRD", o.Kind, o.APIVersion)
			}
		}
		checkKinds(t, base, "Deployment", "PodDisruptionBudget", "Secret", "Service")
		checkListed(t, "deploy/kubernetes/base")
		checkRelay(t, base)
	})
	t.Run("prometheus-operator", func(t *testing.T) {
		checkListed(t, "deploy/kubernetes/components/prometheus-operator")
		withOperator := renderKustomize(t, "deploy/kubernetes/overlays/prometheus-operator")
		checkKinds(t, withOperator, "Deployment", "PodDisruptionBudget", "PrometheusRule", "Secret", "Service", "ServiceMonitor")
		for kind, o := range base {
			if !reflect.DeepEqual(withOperator[kind].raw, o.raw) {
				t.Errorf("the overlay's %s differs from the base's", kind)
			}
		}
		checkRelay(t, withOperator)
		checkServiceMonitor(t, withOperator)
		checkPrometheusRule(t, withOperator)
	})
}

// checkRelay holds one render's Deployment, Service, PodDisruptionBudget
// and Secret against the binary.
func checkRelay(t *testing.T, ms map[string]object) {
	t.Helper()
	checkWorkload(t, ms)
	cfg := checkEnvironment(t, ms)
	checkPorts(t, ms, cfg)
}

// checkWorkload checks the replicas, the selectors, the rollout and the
// pod's security and resources.
func checkWorkload(t *testing.T, ms map[string]object) {
	t.Helper()
	d := ms["Deployment"]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %v, want 2 (one streams, one stands by)", d.Spec.Replicas)
	}
	podLabels := d.Spec.Template.Metadata.Labels
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget"} {
		sel := ms[kind].selector()
		if len(sel) == 0 {
			t.Errorf("the %s has no selector", kind)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("the %s selects %s=%s, which the pods do not carry (%v)", kind, k, v, podLabels)
			}
		}
	}
	if !ms["Service"].Spec.PublishNotReadyAddresses {
		t.Errorf("the Service must publish not-ready addresses, so that a pod failing its readiness is still scraped")
	}
	if pdb := ms["PodDisruptionBudget"].Spec; pdb.MaxUnavailable != 1 || pdb.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v minAvailable %v, want 1 and none", pdb.MaxUnavailable, pdb.MinAvailable)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru.MaxUnavailable != 0 || ru.MaxSurge != 1 {
		t.Errorf("rolling update maxSurge %v maxUnavailable %v, want 1 and 0", ru.MaxSurge, ru.MaxUnavailable)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("the pod must run as a non-root user")
	}
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("the container must have allowPrivilegeEscalation false, readOnlyRootFilesystem true and drop ALL capabilities")
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources: requests %v limits %v; want cpu and memory requests and a memory limit", c.Resources.Requests, c.Resources.Limits)
	}
	if !slices.Equal(c.Args, []string{"run"}) {
		t.Errorf("args %v, want [run]", c.Args)
	}
}

// checkEnvironment checks that the container's environment holds only
// variables run reads, secrets as files the Secret's volume provides, and
// together a configuration run accepts, which it returns.
func checkEnvironment(t *testing.T, ms map[string]object) config.Config {
	t.Helper()
	pod := ms["Deployment"].Spec.Template.Spec
	c := pod.Containers[0]
	names := runEnvNames(t)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	secretDir := ""
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == ms["Secret"].Metadata.Name {
			secretDir = mounts[v.Name]
		}
	}
	if secretDir == "" {
		t.Fatalf("no volume of the Secret %q is mounted", ms["Secret"].Metadata.Name)
	}
	tmp := t.TempDir()
	var environ []string
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "OUTBOX_CDC_") {
			continue
		}
		base, isFile := strings.CutSuffix(e.Name, "_FILE")
		if !names[e.Name] && !(isFile && names[base]) {
			t.Errorf("%s is not a variable outbox-cdc run reads", e.Name)
			continue
		}
		if (strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "POSTGRES_URL")) && !isFile {
			t.Errorf("%s holds a secret: give it as %s_FILE from the Secret", e.Name, e.Name)
		}
		value := e.Value
		if isFile {
			key, ok := strings.CutPrefix(e.Value, secretDir+"/")
			secret, has := ms["Secret"].StringData[key]
			if !ok || !has {
				t.Errorf("%s=%s is not a key of the Secret mounted at %s (keys %v)", e.Name, e.Value, secretDir, slices.Sorted(maps.Keys(ms["Secret"].StringData)))
				continue
			}
			value = filepath.Join(tmp, key)
			if err := os.WriteFile(value, []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		environ = append(environ, e.Name+"="+value)
	}
	cfg, err := config.Parse(config.CmdRun, nil, environ, io.Discard)
	if err != nil {
		t.Fatalf("the Deployment's environment is not a configuration run accepts: %v", err)
	}
	return cfg
}

// checkPorts checks the probes, the scrape annotations, the Service's port
// and the grace period against --http-addr and --drain-timeout.
func checkPorts(t *testing.T, ms map[string]object, cfg config.Config) {
	t.Helper()
	d := ms["Deployment"]
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil || port == "" {
		t.Fatalf("OUTBOX_CDC_HTTP_ADDR %q: %v", cfg.HTTPAddr, err)
	}
	if host != "" && host != "0.0.0.0" {
		t.Errorf("OUTBOX_CDC_HTTP_ADDR %q listens on %s only: the kubelet and Prometheus could not reach it", cfg.HTTPAddr, host)
	}
	portNames := map[string]string{}
	for _, p := range c.Ports {
		portNames[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz?standby=ok"}, {"startup", c.StartupProbe, "/healthz"}} {
		if pr.p == nil {
			t.Errorf("no %s probe", pr.name)
			continue
		}
		if got := resolvePort(portNames, pr.p.HTTPGet.Port); pr.p.HTTPGet.Path != pr.path || got != port {
			t.Errorf("%s probe GET %s on port %v (%s), want %s on %s (--http-addr %s)", pr.name, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port,
				got, pr.path, port, cfg.HTTPAddr)
		}
	}
	ann := d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations port %q path %q, want %s and /metrics", ann["prometheus.io/port"], ann["prometheus.io/path"], port)
	}
	svc := ms["Service"].Spec
	if len(svc.Ports) != 1 || resolvePort(portNames, svc.Ports[0].TargetPort) != port {
		t.Errorf("the Service's port does not reach the container's %s: %+v", port, svc.Ports)
	}
	if grace := pod.TerminationGracePeriodSeconds; float64(grace) <= cfg.Relay.Stream.DrainTimeout.Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d does not outlast --drain-timeout %s: the kubelet would kill a draining relay", grace, cfg.Relay.Stream.DrainTimeout)
	}
}

// resolvePort is a port given by number or by the container port's name.
func resolvePort(names map[string]string, p any) string {
	switch v := p.(type) {
	case int:
		return strconv.Itoa(v)
	case string:
		return names[v]
	}
	return ""
}
