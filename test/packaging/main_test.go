package packaging

import (
	"os"
	"testing"
)

// TestMain removes make dist's output that the tests shared (dists).
func TestMain(m *testing.M) {
	code := m.Run()
	if dists.dir != "" {
		os.RemoveAll(dists.dir)
	}
	os.Exit(code)
}
