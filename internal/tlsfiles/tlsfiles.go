// Package tlsfiles reads the PEM files a TLS client names in its settings
// (a CA, a client certificate and key) into a *tls.Config, the same way
// for every server outbox-cdc reaches over TLS: the Kafka brokers and the
// schema registry.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files names what a TLS client connection needs. The zero value is TLS
// with the system's roots and no client certificate.
type Files struct {
	CAFile             string // PEM CA certificates; empty: the system's roots
	CertFile, KeyFile  string // PEM client certificate and key; empty: none
	ServerName         string // empty: the host connected to
	InsecureSkipVerify bool
}

// Config reads the files f names into a TLS client configuration; what
// ("kafka", "schema registry") names the server in errors.
func (f Files) Config(what string) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         f.ServerName,
		InsecureSkipVerify: f.InsecureSkipVerify, //nolint:gosec // an explicit, documented testing flag
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read %s CA file: %w", what, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s CA file %s holds no PEM certificate", what, f.CAFile)
		}
		cfg.RootCAs = pool
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load %s client certificate %s and key %s: %w", what, f.CertFile, f.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
