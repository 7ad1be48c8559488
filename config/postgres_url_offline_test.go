package config

import (
	"io"
	"testing"
)

// TestOfflineCheckReadsNoFileTheURLNames: --postgres-url is judged by its
// syntax alone; the TLS files and service file it names are the
// connecting machine's, which check --offline (run in CI, on a laptop)
// need not have.
func TestOfflineCheckReadsNoFileTheURLNames(t *testing.T) {
	for _, url := range []string{
		"postgres://relay@db.internal/app?sslmode=verify-full&sslrootcert=/etc/outbox-cdc/prod-ca.pem",
		"postgres://relay@db.internal/app?sslmode=require&sslcert=/etc/outbox-cdc/client.crt&sslkey=/etc/outbox-cdc/client.key",
		"host=db.internal dbname=app sslmode=verify-full sslrootcert=/etc/outbox-cdc/prod-ca.pem sslcert=/etc/outbox-cdc/client.crt sslkey=/etc/outbox-cdc/client.key",
		"postgres://relay@db1:5432,db2:5432/app?service=prod&sslmode=verify-ca&sslrootcert=/etc/outbox-cdc/prod-ca.pem",
	} {
		args := []string{"--offline", "--postgres-url", url, "--kafka-brokers", "k:9092"}
		if _, err := Parse(CmdCheck, args, nil, io.Discard); err != nil {
			t.Errorf("check --offline --postgres-url %s: %v, want valid", url, err)
		}
	}
	// The syntax is still judged, the files aside.
	args := []string{"--offline", "--postgres-url", "postgres://relay@db:99999/app?sslrootcert=/nowhere.pem", "--kafka-brokers", "k:9092"}
	if _, err := Parse(CmdCheck, args, nil, io.Discard); err == nil {
		t.Errorf("check --offline with port 99999: valid, want refused")
	}
}
