package integration

import (
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// startProxy is a loopback TCP proxy to target (see testkit.Proxy), closed
// when the test ends.
func startProxy(t *testing.T, target string) *testkit.Proxy {
	t.Helper()
	p, err := testkit.StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
