package packaging

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/config"
)

// TestPackagedConfigParses: the packages' /etc/outbox-cdc/outbox-cdc.yaml
// is a config file `outbox-cdc run` accepts as shipped, with the Postgres
// URL from the environment file, and again with every commented setting
// (# key: value) switched on, so no example names a key that does not exist
// or a value it refuses; it sets no more than the unit's TimeoutStopSec
// allows for the drain.
func TestPackagedConfigParses(t *testing.T) {
	path := filepath.Join(root(t), "deploy", "packages", "outbox-cdc.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"OUTBOX_CDC_POSTGRES_URL=postgres://outbox_cdc@127.0.0.1:5432/app"}
	c, err := config.Parse(config.CmdRun, []string{"--config", path}, env, io.Discard)
	if err != nil {
		t.Fatalf("as shipped: %v", err)
	}
	if c.Relay.Slot.Name != "outbox_cdc" || c.HTTPAddr != "127.0.0.1:9090" || strings.Join(c.Relay.Kafka.Brokers, ",") != "127.0.0.1:9092" {
		t.Errorf("as shipped: slot %q, http %q, brokers %v", c.Relay.Slot.Name, c.HTTPAddr, c.Relay.Kafka.Brokers)
	}
	unit := readUnit(t, filepath.Join(root(t), "deploy", "systemd", "outbox-cdc.service"))
	if stop := unit.duration(t, "Service.TimeoutStopSec"); c.Relay.Stream.DrainTimeout+10*time.Second > stop {
		t.Errorf("drain_timeout %s leaves no margin under the unit's TimeoutStopSec=%s", c.Relay.Stream.DrainTimeout, stop)
	}

	// Every example switched on; its files made where it names them.
	dir := t.TempDir()
	commented := regexp.MustCompile(`(?m)^# ([a-z_]+: .*)$`)
	examples := commented.FindAllString(string(b), -1)
	if len(examples) < 5 {
		t.Fatalf("%d commented settings in %s", len(examples), path)
	}
	all := commented.ReplaceAllString(string(b), "$1")
	all = strings.ReplaceAll(all, "/etc/outbox-cdc/", dir+"/")
	writeCA(t, filepath.Join(dir, "kafka-ca.pem"))
	allPath := filepath.Join(dir, "all.yaml")
	if err := os.WriteFile(allPath, []byte(all), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(config.CmdRun, []string{"--config", allPath}, append(env, "OUTBOX_CDC_KAFKA_SASL_PASSWORD=x"), io.Discard); err != nil {
		t.Errorf("with %s switched on: %v", strings.Join(examples, "; "), err)
	}
}

// TestPackagedEnvironmentFile: the secrets file names only variables `run`
// reads (the Postgres URL and the SASL password among them), and sets none:
// a variable set empty would win over the config file's key.
func TestPackagedEnvironmentFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "packages", "outbox-cdc.env"))
	if err != nil {
		t.Fatal(err)
	}
	names := runEnvNames(t)
	named := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "# ") || line == "#" {
			continue
		}
		m := regexp.MustCompile(`^#(OUTBOX_CDC_[A-Z0-9_]+)=`).FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%q: want a comment or a commented #OUTBOX_CDC_NAME=value", line)
			continue
		}
		if !names[m[1]] {
			t.Errorf("%s: outbox-cdc run reads no such variable", m[1])
		}
		named[m[1]] = true
	}
	for _, want := range []string{"OUTBOX_CDC_POSTGRES_URL", "OUTBOX_CDC_KAFKA_SASL_PASSWORD"} {
		if !named[want] {
			t.Errorf("the environment file does not show %s", want)
		}
	}
}

// writeCA writes a self-signed CA certificate in PEM to path.
func writeCA(t *testing.T, path string) {
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
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
