package packaging

import (
	"os/exec"
	"testing"
)

// tool finds a program a test runs (promtool, buildah) on PATH. When it is
// missing, go test -short skips the test, saying what to install: -short
// is the suite a machine with only Go runs. The full suite (make test,
// .ci/run, whose setup installs these tools) fails instead, so that a CI
// machine which lost a tool says so rather than passing without the check.
func tool(t *testing.T, name, install, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	switch {
	case err == nil:
		return p
	case testing.Short():
		t.Skipf("%s not on PATH (%s): it %s; go test without -short fails instead", name, install, why)
	default:
		t.Fatalf("%s not on PATH (%s; make setup-tests installs it): it %s", name, install, why)
	}
	return ""
}
