package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTransportWarnings runs check and run against a broker (kfake) that
// takes SASL PLAIN on a plaintext listener: refused without
// --kafka-sasl-allow-plaintext, a warning with it (check's item, run's one
// line at start), and neither the SASL password nor the Postgres one ever
// printed, right or wrong. Postgres is not there: its items fail at once.
func TestTransportWarnings(t *testing.T) {
	const user, password, pgPassword = "relay", "Sasl-Pw-4711", "Pg-Pw-0815"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", user, password))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	base := []string{"--postgres-url", "postgres://relay:" + pgPassword + "@127.0.0.1:1/app?sslmode=disable",
		"--kafka-brokers", cluster.ListenAddrs()[0], "--kafka-sasl-mechanism", "plain", "--kafka-sasl-username", user}
	environ := []string{"OUTBOX_CDC_KAFKA_SASL_PASSWORD=" + password}
	exec := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := mainExit(args, environ, &out, &out)
		if s := out.String(); strings.Contains(s, password) || strings.Contains(s, pgPassword) || strings.Contains(s, "Wrong-Pw") {
			t.Errorf("%q printed a password:\n%s", args, s)
		}
		return code, out.String()
	}

	code, out := exec(append([]string{"check"}, base...)...)
	if code != exitUsage || strings.Count(out, "\n") != 1 || !strings.Contains(out, "without TLS sends the password in clear") ||
		!strings.Contains(out, "--kafka-sasl-allow-plaintext (OUTBOX_CDC_KAFKA_SASL_ALLOW_PLAINTEXT=true)") {
		t.Errorf("check, SASL PLAIN without TLS: exit %d, want %d and one line naming the flag:\n%s", code, exitUsage, out)
	}

	code, out = exec(append([]string{"check", "--kafka-sasl-allow-plaintext"}, base...)...)
	for _, want := range []string{"[ok  ] postgres TLS: local connection", "[warn] kafka TLS: SASL PLAIN without TLS", "[ok  ] kafka reachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("check --kafka-sasl-allow-plaintext (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	run := append([]string{"run", "--kafka-sasl-allow-plaintext", "--http-addr", ""}, base...)
	code, out = exec(run...)
	if code != exitFailure || strings.Count(out, "kafka TLS: SASL PLAIN without TLS") != 1 || !strings.Contains(out, "connect to postgres") {
		t.Errorf("run: exit %d, want %d, the transport warning once and the unreachable Postgres:\n%s", code, exitFailure, out)
	}
	// kfake hangs up on wrong credentials (a real broker's refusal is
	// TestKafkaTLSAndSASL's): what matters here is what is printed.
	if code, out = exec(append(run, "--kafka-sasl-password", "Wrong-Pw-1")...); code != exitFailure {
		t.Errorf("run with a wrong password: exit %d:\n%s", code, out)
	}
}
