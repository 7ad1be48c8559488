package packaging

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

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
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
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

// readManifests parses every document of every YAML file in deploy/kubernetes.
func readManifests(t *testing.T) map[string]manifest {
	t.Helper()
	dir := filepath.Join(root(t), "deploy", "kubernetes")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	out := map[string]manifest{}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var m manifest
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			if m.Kind == "" || m.APIVersion == "" {
				t.Errorf("%s: a document without kind or apiVersion", filepath.Base(f))
			}
			out[m.Kind] = m
		}
		names = append(names, filepath.Base(f))
	}
	for _, name := range names {
		if name != "kustomization.yaml" && !slices.Contains(out["Kustomization"].Resources, name) {
			t.Errorf("kustomization.yaml does not list %s", name)
		}
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "Secret", "Kustomization"} {
		if _, ok := out[kind]; !ok {
			t.Errorf("deploy/kubernetes has no %s", kind)
		}
	}
	return out
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

// TestKubernetesManifests holds deploy/kubernetes against the binary: every
// OUTBOX_CDC_* variable is one `run` reads and together they parse as a
// configuration; the probes ask the relay's HTTP port for /healthz and
// /readyz; the pod runs as non-root on a read-only root filesystem without
// privilege escalation; secrets arrive as files; the Service, the
// ServiceMonitor and the PodDisruptionBudget select the pods.
func TestKubernetesManifests(t *testing.T) {
	ms := readManifests(t)
	d := ms["Deployment"]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %v, want 2 (one streams, one stands by)", d.Spec.Replicas)
	}
	podLabels := d.Spec.Template.Metadata.Labels
	selects := func(what string, sel map[string]string) {
		t.Helper()
		if len(sel) == 0 {
			t.Errorf("%s has no selector", what)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%s, which the pods do not carry (%v)", what, k, v, podLabels)
			}
		}
	}
	selects("the Deployment", d.selector())
	selects("the Service", ms["Service"].selector())
	selects("the PodDisruptionBudget", ms["PodDisruptionBudget"].selector())
	for k, v := range ms["ServiceMonitor"].selector() {
		if ms["Service"].Metadata.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the Service does not carry", k, v)
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

	// The environment: only variables run reads, secrets as files that
	// the secret volume provides, and together a configuration run accepts.
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
		if strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "POSTGRES_URL") {
			if !isFile {
				t.Errorf("%s holds a secret: give it as %s_FILE from the Secret", e.Name, e.Name)
			}
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

	// Probes and ports against --http-addr.
	_, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil || port == "" {
		t.Fatalf("OUTBOX_CDC_HTTP_ADDR %q: %v", cfg.HTTPAddr, err)
	}
	if host, _, _ := net.SplitHostPort(cfg.HTTPAddr); host != "" && host != "0.0.0.0" {
		t.Errorf("OUTBOX_CDC_HTTP_ADDR %q listens on %s only: the kubelet and Prometheus could not reach it", cfg.HTTPAddr, host)
	}
	portNames := map[string]string{}
	for _, p := range c.Ports {
		portNames[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	resolve := func(p any) string {
		switch v := p.(type) {
		case int:
			return strconv.Itoa(v)
		case string:
			return portNames[v]
		}
		return ""
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
		if pr.p.HTTPGet.Path != pr.path || resolve(pr.p.HTTPGet.Port) != port {
			t.Errorf("%s probe GET %s on port %v (%s), want %s on %s (--http-addr %s)", pr.name, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port,
				resolve(pr.p.HTTPGet.Port), pr.path, port, cfg.HTTPAddr)
		}
	}
	ann := d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations port %q path %q, want %s and /metrics", ann["prometheus.io/port"], ann["prometheus.io/path"], port)
	}
	svc := ms["Service"].Spec
	if len(svc.Ports) != 1 || resolve(svc.Ports[0].TargetPort) != port {
		t.Errorf("the Service's port does not reach the container's %s: %+v", port, svc.Ports)
	}
	if eps := ms["ServiceMonitor"].Spec.Endpoints; len(eps) != 1 || eps[0].Port != svc.Ports[0].Name || eps[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor's endpoint %+v does not scrape the Service's port %q at /metrics", eps, svc.Ports[0].Name)
	}
	if grace := pod.TerminationGracePeriodSeconds; float64(grace) <= cfg.DrainTimeout.Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d does not outlast --drain-timeout %s: the kubelet would kill a draining relay", grace, cfg.DrainTimeout)
	}
}
