package main

import (
	"fmt"
	"runtime"

	"github.com/outbox-cdc/outbox-cdc/internal/buildinfo"
)

// Stamped at build time by make: -ldflags "-X main.version=v1.2.3 -X
// main.commit=abc1234". A build that did not stamp them (go build, go
// install …@v0.1.0) is described by its build information instead, when
// the program starts.
var (
	version = "dev"
	commit  = "unknown"
	built   = "" // the commit's time, from the build information only
)

func init() { version, commit, built = buildinfo.Fill(version, commit) }

// versionLine is what `outbox-cdc version` prints.
func versionLine() string {
	at := ""
	if built != "" {
		at = " at " + built
	}
	return fmt.Sprintf("outbox-cdc %s (commit %s%s, %s %s/%s)", version, commit, at, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
