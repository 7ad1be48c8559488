package registry

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/tlsfiles"
)

// A registry whose certificate a private CA signs is reached with that CA
// (--schema-registry-ca-file), and refused without it; TLS files with an
// http:// URL are a configuration error.
func TestRegistryCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(`["orders-OrderPlaced"]`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	plain, err := newClient(srv.URL, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.subjects(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}

	c, err := newClient(srv.URL, "", "", &tlsfiles.Files{CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.subjects(context.Background()); err != nil || len(got) != 1 {
		t.Errorf("with the CA: %q, %v", got, err)
	}
	if tr, ok := c.http.Transport.(*http.Transport); !ok || tr.TLSClientConfig.MinVersion < tls.VersionTLS12 {
		t.Errorf("transport %T: want TLS 1.2 at least", c.http.Transport)
	}

	if _, err := newClient(strings.Replace(srv.URL, "https", "http", 1), "", "", &tlsfiles.Files{CAFile: ca}); err == nil || !strings.Contains(err.Error(), "https://") {
		t.Errorf("TLS files with http://: %v, want an error asking for https://", err)
	}
	if _, err := newClient(srv.URL, "", "", &tlsfiles.Files{CAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil || !strings.Contains(err.Error(), "schema registry CA file") {
		t.Errorf("a missing CA file: %v", err)
	}
}
