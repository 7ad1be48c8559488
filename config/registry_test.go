package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaRegistryFlags: --schema-registry and its credentials reach
// relay.Config (the password from its _FILE variable too), and what cannot
// work is refused naming the flag.
func TestSchemaRegistryFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--contracts", "schemas"}
	c, err := Parse(CmdRun, append(base, "--schema-registry", "http://127.0.0.1:8080/apis/ccompat/v7", "--schema-registry-user", "relay"),
		[]string{"OUTBOX_CDC_SCHEMA_REGISTRY_PASSWORD_FILE=" + pw}, io.Discard)
	g := c.Relay.Contracts.Registry
	if err != nil || g.URL != "http://127.0.0.1:8080/apis/ccompat/v7" || g.User != "relay" || g.Password != "s3cret" {
		t.Fatalf("parsed %+v, %v", g, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no contracts", []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--schema-registry", "http://r:8081"}, "--schema-registry needs --contracts"},
		{"not raw", append(base, "--schema-registry", "http://r:8081", "--envelope", "cloudevents"), "needs --envelope=raw"},
		{"not a URL", append(base, "--schema-registry", "r:8081"), "--schema-registry \"r:8081\""},
		{"password in URL", append(base, "--schema-registry", "http://u:p@r:8081"), "not in the URL"},
		{"user alone", append(base, "--schema-registry", "http://r:8081", "--schema-registry-user", "u"), "--schema-registry-user and --schema-registry-password"},
		{"credentials alone", append(base, "--schema-registry-user", "u", "--schema-registry-password", "p"), "need --schema-registry"},
	} {
		_, err := Parse(CmdRun, tc.args, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "p@") {
			t.Errorf("%s: the error quotes the password: %v", tc.name, err)
		}
	}
}
