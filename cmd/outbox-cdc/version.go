package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
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

func init() {
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, commit, built = fromBuildInfo(version, commit, bi)
	}
}

// fromBuildInfo fills what -ldflags left at its default from the module's
// build information: the main module's version (set by go install
// module@version, or derived from the VCS tag by go build since Go 1.24),
// and the vcs.revision, vcs.modified and vcs.time settings go build records
// in a checkout (unless -buildvcs=false).
func fromBuildInfo(version, commit string, bi *debug.BuildInfo) (v, c, t string) {
	v, c = version, commit
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			t = s.Value
		}
	}
	if c != "unknown" {
		return v, c, "" // stamped: the time is not that commit's
	}
	if rev == "" {
		return v, c, ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+dirty"
	}
	return v, rev, t
}

// versionLine is what `outbox-cdc version` prints.
func versionLine() string {
	at := ""
	if built != "" {
		at = " at " + built
	}
	return fmt.Sprintf("outbox-cdc %s (commit %s%s, %s %s/%s)", version, commit, at, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
