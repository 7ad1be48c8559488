package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// TestSASLPlainNeedsTLS: SASL PLAIN sends the password as it is, so without
// TLS it is refused unless --kafka-sasl-allow-plaintext says so; SCRAM,
// which never sends it, is not.
func TestSASLPlainNeedsTLS(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1",
		"--kafka-sasl-username", "u", "--kafka-sasl-password", "pw"}
	tests := []struct {
		name string
		args []string
		env  []string
		want string // empty: accepted
	}{
		{"plain without TLS", []string{"--kafka-sasl-mechanism", "plain"}, nil,
			"--kafka-sasl-mechanism=plain without TLS sends the password in clear: add --kafka-tls"},
		{"plain without TLS, allowed", []string{"--kafka-sasl-mechanism", "plain", "--kafka-sasl-allow-plaintext"}, nil, ""},
		{"plain without TLS, allowed by env", []string{"--kafka-sasl-mechanism", "plain"},
			[]string{"OUTBOX_CDC_KAFKA_SASL_ALLOW_PLAINTEXT=true"}, ""},
		{"plain over TLS", []string{"--kafka-sasl-mechanism", "plain", "--kafka-tls"}, nil, ""},
		{"scram without TLS", []string{"--kafka-sasl-mechanism", "scram-sha-512"}, nil, ""},
	}
	for _, cmd := range []string{CmdRun, CmdCheck, CmdSetup} {
		for _, tt := range tests {
			_, err := Parse(cmd, append(append([]string{}, base...), tt.args...), tt.env, io.Discard)
			var ue *UsageError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s, %s: %v, want it accepted", cmd, tt.name, err)
			case tt.want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("%s, %s: %v, want a usage error containing %q", cmd, tt.name, err, tt.want)
			}
		}
	}
}

// TestSCRAMPasswordIsNotQuoted: a password SASLprep (RFC 4013) refuses is a
// usage error that does not quote it, as the SCRAM library's error would.
func TestSCRAMPasswordIsNotQuoted(t *testing.T) {
	const pw = "s3cret\u0007bell"
	for _, field := range []string{"--kafka-sasl-password", "--kafka-sasl-username"} {
		args := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--kafka-tls",
			"--kafka-sasl-mechanism", "scram-sha-256", "--kafka-sasl-username", "u", "--kafka-sasl-password", "pw", field, pw}
		_, err := Parse(CmdRun, args, nil, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), field) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s with a control character: %v, want a usage error naming the flag, not the value", field, err)
		}
	}
}

// TestPostgresTransport: every host that is not local must be reached over
// TLS with its certificate verified, or check and run warn, naming it.
func TestPostgresTransport(t *testing.T) {
	for _, v := range []string{"PGSSLMODE", "PGSSLROOTCERT", "PGHOST", "PGPORT", "PGSSLNEGOTIATION"} {
		t.Setenv(v, "") // pgconn reads them
	}
	ca := writeCA(t)
	tests := []struct {
		url    string
		status checklist.Status
		detail string // a part of it
	}{
		{"postgres://u@db.example.com/app", checklist.Warn, "reached db.example.com:5432 by unverified TLS or plaintext (sslmode prefer, libpq's default, or allow): anyone"},
		{"postgres://u@db.example.com:6432/app?sslmode=require", checklist.Warn, "db.example.com:6432 by TLS without certificate verification (sslmode require)"},
		{"host=10.0.0.7 user=u sslmode=disable", checklist.Warn, "10.0.0.7:5432 by plaintext (sslmode disable)"},
		{"postgres://u@db.example.com/app?sslmode=allow", checklist.Warn, "unverified TLS or plaintext"},
		{"postgres://u@127.0.0.1:5432,db2.example.com:5433/app", checklist.Warn, "reached db2.example.com:5433 by unverified TLS or plaintext (sslmode prefer, libpq's default, or allow): anyone"},
		{"postgres://u@db1,db2/app?sslmode=verify-full&sslrootcert=" + ca + "&target_session_attrs=primary", checklist.OK, "host name verified (verify-full)"},
		{"postgres://u@db.example.com/app?sslmode=verify-ca&sslrootcert=" + ca, checklist.OK, "verify-ca: not its host name"},
		{"postgres://u@db.example.com/app?sslmode=require&sslrootcert=" + ca, checklist.OK, "verify-ca"}, // libpq: require with a root certificate verifies the chain
		{"postgres://u@127.0.0.1/app?sslmode=disable", checklist.OK, "local connection"},
		{"postgres://u@localhost/app", checklist.OK, "local connection"},
		{"postgres://u@[::1]:5432/app", checklist.OK, "local connection"},
		{"host=/var/run/postgresql user=u", checklist.OK, "local connection"},
		{"postgres://u@db.example.com/app?sslmode=bogus", checklist.Skip, "cannot be parsed"},
	}
	for _, tt := range tests {
		it := Config{Relay: relay.Config{PostgresURL: tt.url}}.PostgresTransport()
		if it.Status != tt.status || !strings.Contains(it.Detail, tt.detail) {
			t.Errorf("%s:\n got [%s] %s\nwant [%s] …%s…", tt.url, it.Status, it.Detail, tt.status, tt.detail)
		}
		if it.Status == checklist.Warn && !strings.Contains(it.Fix, "sslmode=verify-full and sslrootcert=") {
			t.Errorf("%s: fix %q", tt.url, it.Fix)
		}
	}
}

// TestKafkaTransport: credentials or events in clear are a warning with its
// fix; verified TLS, or plaintext to this machine only, is not.
func TestKafkaTransport(t *testing.T) {
	tests := []struct {
		name    string
		brokers []string
		k       relay.Kafka
		status  checklist.Status
		detail  string
	}{
		{"verified TLS", []string{"k1:9093"}, relay.Kafka{TLS: true, SASL: sink.SASL{Mechanism: "plain"}}, checklist.OK, "certificates verified"},
		{"TLS, any certificate", []string{"k1:9093"}, relay.Kafka{TLS: true, TLSFiles: sink.TLSFiles{InsecureSkipVerify: true}}, checklist.Warn, "--kafka-tls-insecure-skip-verify"},
		{"PLAIN in clear, allowed", []string{"127.0.0.1:9092"}, relay.Kafka{SASL: sink.SASL{Mechanism: "plain"}, SASLAllowPlaintext: true}, checklist.Warn, "the password travels in clear"},
		{"SCRAM in clear", []string{"127.0.0.1:9092", "k2:9092"}, relay.Kafka{SASL: sink.SASL{Mechanism: "scram-sha-512"}}, checklist.Warn, "SCRAM does not send the password"},
		{"plaintext, remote", []string{"k1:9092"}, relay.Kafka{}, checklist.Warn, "without authentication"},
		{"plaintext, local", []string{"127.0.0.1:9092", "localhost:9093"}, relay.Kafka{}, checklist.OK, "on this machine only"},
		{"SCRAM in clear, local", []string{"[::1]:9092"}, relay.Kafka{SASL: sink.SASL{Mechanism: "scram-sha-256"}}, checklist.OK, "on this machine only"},
	}
	for _, tt := range tests {
		tt.k.Brokers = tt.brokers
		it := Config{Relay: relay.Config{Kafka: tt.k}}.KafkaTransport()
		if it.Status != tt.status || !strings.Contains(it.Detail, tt.detail) || (it.Status == checklist.Warn) != (it.Fix != "") {
			t.Errorf("%s: [%s] %s (fix %q), want [%s] …%s…", tt.name, it.Status, it.Detail, it.Fix, tt.status, tt.detail)
		}
	}
}

func TestTransportWarningsAreOneLineEach(t *testing.T) {
	c := Config{Relay: relay.Config{PostgresURL: "postgres://u:pw@db.example.com/app",
		Kafka: relay.Kafka{Brokers: []string{"127.0.0.1:9092"}, SASL: sink.SASL{Mechanism: "plain", Password: "pw"}, SASLAllowPlaintext: true}}}
	w := c.TransportWarnings()
	if len(w) != 2 || !strings.HasPrefix(w[0], "postgres TLS: reached db.example.com:5432") || !strings.HasPrefix(w[1], "kafka TLS: SASL PLAIN without TLS") {
		t.Fatalf("TransportWarnings() = %q", w)
	}
	for _, l := range w {
		if strings.Contains(l, "\n") || !strings.Contains(l, "; fix: ") || strings.Contains(l, "pw@") {
			t.Errorf("warning %q: want one line with its fix, no password", l)
		}
	}
	if w := (Config{Relay: relay.Config{PostgresURL: "postgres://u@localhost/app", Kafka: relay.Kafka{Brokers: []string{"localhost:9092"}}}}).TransportWarnings(); len(w) != 0 {
		t.Errorf("a local setup: %q, want no warning", w)
	}
}

// writeCA writes a self-signed CA certificate and returns its file.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRegistryTransport: basic auth credentials or schemas in clear are a
// warning with its fix, as for Postgres and Kafka; https is not.
func TestRegistryTransport(t *testing.T) {
	tests := []struct {
		name   string
		g      relay.Registry
		status checklist.Status
		detail string
	}{
		{"credentials over http", relay.Registry{URL: "http://127.0.0.1:8081", User: "u", Password: "p"}, checklist.Warn, "basic auth password travels in clear"},
		{"http, remote", relay.Registry{URL: "http://registry.example.com:8081"}, checklist.Warn, "anyone on the path"},
		{"http, local", relay.Registry{URL: "http://localhost:8081/apis/ccompat/v7"}, checklist.OK, "on this machine only"},
		{"https", relay.Registry{URL: "https://registry.example.com", User: "u", Password: "p", CAFile: "ca.pem"}, checklist.OK, "TLS"},
	}
	for _, tt := range tests {
		it := Config{Relay: relay.Config{Contracts: relay.Contracts{Registry: tt.g}}}.RegistryTransport()
		if it.Status != tt.status || !strings.Contains(it.Detail, tt.detail) || (it.Status == checklist.Warn) != (it.Fix != "") {
			t.Errorf("%s: [%s] %s (fix %q), want [%s] …%s…", tt.name, it.Status, it.Detail, it.Fix, tt.status, tt.detail)
		}
	}
	c := Config{Relay: relay.Config{PostgresURL: "postgres://u@localhost/app", Kafka: relay.Kafka{Brokers: []string{"localhost:9092"}},
		Contracts: relay.Contracts{Registry: relay.Registry{URL: "http://127.0.0.1:8081", User: "u", Password: "s3cr3t"}}}}
	if w := c.TransportWarnings(); len(w) != 1 || !strings.HasPrefix(w[0], "schema registry TLS: ") || strings.Contains(w[0], "s3cr3t") {
		t.Errorf("TransportWarnings() = %q, want the registry's one line, no password", w)
	}
	if w := (Config{Relay: relay.Config{PostgresURL: "postgres://u@localhost/app", Kafka: relay.Kafka{Brokers: []string{"localhost:9092"}}}}).TransportWarnings(); len(w) != 0 {
		t.Errorf("no registry: %q, want no warning", w)
	}
}
