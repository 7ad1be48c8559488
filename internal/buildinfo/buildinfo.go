// Package buildinfo describes the running build: its version and commit
// as make stamped them, or as the Go toolchain recorded them.
package buildinfo

import "runtime/debug"

// Fill is FromBuildInfo with this program's build information, when it
// has some.
func Fill(version, commit string) (v, c, t string) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return FromBuildInfo(version, commit, bi)
	}
	return version, commit, ""
}

// FromBuildInfo fills what -ldflags left at its default from the module's
// build information: the main module's version (set by go install
// module@version, or derived from the VCS tag by go build since Go 1.24),
// and the vcs.revision, vcs.modified and vcs.time settings go build records
// in a checkout (unless -buildvcs=false).
func FromBuildInfo(version, commit string, bi *debug.BuildInfo) (v, c, t string) {
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
