package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContractsRefused: a contract that does not compile is a usage error
// (exit 2) naming its file, for run before it connects anywhere, and for
// check --offline, which lists every such file; a directory whose
// contracts compile passes check --offline, saying how many.
func TestContractsRefused(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"OrderPlaced.json": `{"type": "object"}`,
		"Broken.json":      `{"type": "objekt"}`,
		"Remote.json":      `{"$ref": "https://example.com/order.json"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"--postgres-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1", "--contracts", dir}
	code, _, errOut := exec(t, append([]string{"run", "--http-addr", ""}, base...)...)
	if code != exitUsage || !strings.Contains(errOut, filepath.Join(dir, "Broken.json")) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("run: exit %d, stderr %q; want 2 naming Broken.json, on one line", code, errOut)
	}
	code, out, _ := exec(t, append([]string{"check", "--offline"}, base...)...)
	if code != exitUsage || !strings.Contains(out, "[FAIL] contract "+filepath.Join(dir, "Broken.json")) ||
		!strings.Contains(out, "[FAIL] contract "+filepath.Join(dir, "Remote.json")) || !strings.Contains(out, "remote $ref https://example.com/order.json refused") ||
		!strings.Contains(out, "2 of 2 checks failed") {
		t.Errorf("check --offline: exit %d:\n%s", code, out)
	}
	for _, name := range []string{"Broken.json", "Remote.json"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = exec(t, append([]string{"check", "--offline"}, base...)...)
	if code != exitOK || !strings.Contains(out, "[ok  ] contracts: 1 compiled from "+dir+" (OrderPlaced)") || !strings.Contains(out, "the configuration is valid") {
		t.Errorf("check --offline, contracts that compile: exit %d:\n%s", code, out)
	}
}
