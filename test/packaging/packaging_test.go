// Package packaging checks the files that ship outbox-cdc: the release
// archives, their SBOMs and checksums are made as make dist makes them and
// inspected; the image is built with buildah from the Dockerfile and its
// entrypoint run under chroot against real servers (no Docker engine or
// Kubernetes cluster is here); docker-compose.yml and deploy/kubernetes are
// parsed and held against the binary's own flags; deploy/prometheus's alert
// rules are unit-tested with promtool.
package packaging

import (
	"bytes"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := testkit.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runEnvNames are the environment variables `outbox-cdc run` reads, from
// its help text.
func runEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	var help bytes.Buffer
	if _, err := config.Parse(config.CmdRun, []string{"--help"}, nil, &help); err == nil {
		t.Fatal("--help returned no ErrHelp")
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(env (OUTBOX_CDC_[A-Z0-9_]+),`).FindAllStringSubmatch(help.String(), -1) {
		names[m[1]] = true
	}
	if len(names) < 20 {
		t.Fatalf("found %d environment names in the help text", len(names))
	}
	return names
}

type composeFile struct {
	Services map[string]struct {
		Image       string                                `yaml:"image"`
		Build       *struct{ Context, Dockerfile string } `yaml:"build"`
		Command     any                                   `yaml:"command"`
		Entrypoint  any                                   `yaml:"entrypoint"`
		Environment map[string]string                     `yaml:"environment"`
		Ports       []string                              `yaml:"ports"`
		Volumes     []string                              `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct{ Test []string } `yaml:"healthcheck"`
	} `yaml:"services"`
}

func flatten(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, p := range v {
			parts = append(parts, flatten(p))
		}
		return strings.Join(parts, " ")
	}
	return ""
}

func TestComposeFileMatchesTheBinary(t *testing.T) {
	dir := root(t)
	b, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "kafka", "outbox-cdc", "writer", "consumer"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	pgSvc, kafkaSvc, relay, writer := c.Services["postgres"], c.Services["kafka"], c.Services["outbox-cdc"], c.Services["writer"]

	// Postgres: the official image, logical decoding, the outbox table.
	if !strings.HasPrefix(pgSvc.Image, "postgres:") || !strings.Contains(flatten(pgSvc.Command), "wal_level=logical") {
		t.Errorf("postgres: image %q, command %q; want the official image with wal_level=logical", pgSvc.Image, flatten(pgSvc.Command))
	}
	initSQL := ""
	for _, v := range pgSvc.Volumes {
		host, target, _ := strings.Cut(v, ":")
		if strings.HasPrefix(target, "/docker-entrypoint-initdb.d/") {
			sql, err := os.ReadFile(filepath.Join(dir, host))
			if err != nil {
				t.Errorf("postgres init script %s: %v", host, err)
			}
			initSQL += string(sql)
		}
	}
	for _, col := range []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers", "created_at"} {
		if !regexp.MustCompile(`(?m)^\s+` + col + `\s`).MatchString(initSQL) {
			t.Errorf("the init script creates no outbox column %q (the relay's default mapping)", col)
		}
	}

	// Kafka: the official image in KRaft mode; the relay reaches it on the
	// listener advertised to the compose network.
	if !strings.HasPrefix(kafkaSvc.Image, "apache/kafka:") || kafkaSvc.Environment["KAFKA_PROCESS_ROLES"] != "broker,controller" {
		t.Errorf("kafka: image %q, roles %q; want apache/kafka in KRaft combined mode", kafkaSvc.Image, kafkaSvc.Environment["KAFKA_PROCESS_ROLES"])
	}
	advertised := kafkaSvc.Environment["KAFKA_ADVERTISED_LISTENERS"]

	// outbox-cdc: every variable is one the binary reads, and together they
	// are a valid configuration.
	if relay.Build == nil || relay.Build.Context != "." || relay.Build.Dockerfile != "Dockerfile" {
		t.Errorf("outbox-cdc is not built from ./Dockerfile")
	}
	names := runEnvNames(t)
	var environ []string
	for k, v := range relay.Environment {
		if !names[strings.TrimSuffix(k, "_FILE")] {
			t.Errorf("outbox-cdc environment %s is not a variable outbox-cdc run reads", k)
		}
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Parse(config.CmdRun, nil, environ, io.Discard)
	if err != nil {
		t.Fatalf("the compose environment is not a valid configuration: %v", err)
	}
	for _, b := range cfg.Relay.Kafka.Brokers {
		if !strings.Contains(advertised, "://"+b) {
			t.Errorf("OUTBOX_CDC_KAFKA_BROKERS %s is not a listener kafka advertises (%s)", b, advertised)
		}
	}
	u, err := url.Parse(cfg.Relay.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if u.Hostname() != "postgres" || u.User.Username() != pgSvc.Environment["POSTGRES_USER"] || pw != pgSvc.Environment["POSTGRES_PASSWORD"] ||
		strings.TrimPrefix(u.Path, "/") != pgSvc.Environment["POSTGRES_DB"] {
		t.Errorf("OUTBOX_CDC_POSTGRES_URL %s does not match the postgres service's user, password and database", u.Redacted())
	}
	_, port, _ := strings.Cut(cfg.HTTPAddr, ":")
	published := false
	for _, p := range relay.Ports {
		published = published || strings.HasSuffix(p, ":"+port)
	}
	if !published {
		t.Errorf("the metrics port %s (OUTBOX_CDC_HTTP_ADDR %q) is not published: %v", port, cfg.HTTPAddr, relay.Ports)
	}
	for _, dep := range []string{"postgres", "kafka"} {
		if relay.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("outbox-cdc does not wait for %s to be healthy", dep)
		}
		if c.Services[dep].Healthcheck == nil {
			t.Errorf("%s has no healthcheck", dep)
		}
	}

	// The writer writes to the table the relay reads.
	if !strings.Contains(flatten(writer.Command), "INSERT INTO "+cfg.Relay.Tables[0].Name) {
		t.Errorf("the writer does not insert into %s", cfg.Relay.Tables[0].Name)
	}
	// Published ports stay on loopback.
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %s on every interface; bind it to 127.0.0.1", name, p)
			}
		}
	}
}

// TestDockerfile: the image needs no base image from a registry (FROM
// scratch) and holds the static binaries make image-context builds;
// TestImageRelaysEvents builds it and runs its entrypoint, and
// TestReleaseArchives checks that binary is static.
func TestDockerfile(t *testing.T) {
	dir := root(t)
	b, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms, copies []string
	var user, entrypoint string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entrypoint = strings.Join(f[1:], " ")
		case "COPY":
			copies = append(copies, strings.Join(f[1:], " "))
		}
	}
	if strings.Join(froms, " ") != "scratch" {
		t.Errorf("FROM %v; want scratch alone (no registry can be reached to pull a base image)", froms)
	}
	if user != "65532:65532" {
		t.Errorf("USER %q; want 65532:65532", user)
	}
	if entrypoint != `["/outbox-cdc"]` {
		t.Errorf("ENTRYPOINT %s", entrypoint)
	}
	for _, c := range []string{"bin/image/linux_${TARGETARCH}/outbox-cdc /outbox-cdc", "bin/image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"} {
		if !slices.Contains(copies, c) {
			t.Errorf("no COPY %s (copies: %v)", c, copies)
		}
	}
	for _, l := range []string{"version", "revision", "source", "licenses", "created"} {
		if !strings.Contains(string(b), "org.opencontainers.image."+l+"=") {
			t.Errorf("no label org.opencontainers.image.%s", l)
		}
	}
}
