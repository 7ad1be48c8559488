package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestVersionFlag: `outbox-cdc --version` is `outbox-cdc version`.
func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		code := mainExit(args, nil, &stdout, &stderr)
		if code != exitOK || !strings.HasPrefix(stdout.String(), "outbox-cdc ") || !strings.Contains(stdout.String(), "(commit ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}
