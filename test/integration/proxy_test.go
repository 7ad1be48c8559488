package integration

import (
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

// startProxy is a loopback TCP proxy to target (see harness.Proxy), closed
// when the test ends.
func startProxy(t *testing.T, target string) *harness.Proxy {
	t.Helper()
	p, err := harness.StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
