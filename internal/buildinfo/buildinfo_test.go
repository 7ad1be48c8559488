package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified, at string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: at},
			{Key: "vcs.modified", Value: modified},
		}
	}
	const rev = "3830793923aa6f606614aeab0777b29fbdfa2817"
	tests := []struct {
		name                string
		version, commit     string
		main                string
		settings            []debug.BuildSetting
		wantV, wantC, wantT string
	}{
		{"stamped by make: ldflags win", "v0.1.0", "3830793", "(devel)", vcs(rev, "false", "2026-11-24T10:00:00Z"),
			"v0.1.0", "3830793", ""},
		{"go install …@v0.1.0: the module's version, no VCS", "dev", "unknown", "v0.1.0", nil,
			"v0.1.0", "unknown", ""},
		{"go build at a tag", "dev", "unknown", "v0.1.0", vcs(rev, "false", "2026-11-24T10:00:00Z"),
			"v0.1.0", "3830793923aa", "2026-11-24T10:00:00Z"},
		{"go build in a modified checkout", "dev", "unknown", "v0.1.1-0.20261124100000-3830793923aa+dirty", vcs(rev, "true", "2026-11-24T10:00:00Z"),
			"v0.1.1-0.20261124100000-3830793923aa+dirty", "3830793923aa+dirty", "2026-11-24T10:00:00Z"},
		{"go build -buildvcs=false", "dev", "unknown", "(devel)", []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "0"}},
			"dev", "unknown", ""},
		{"version stamped, commit not", "v0.2.0", "unknown", "(devel)", vcs(rev, "false", "2026-11-24T10:00:00Z"),
			"v0.2.0", "3830793923aa", "2026-11-24T10:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/outbox-cdc/outbox-cdc", Version: tt.main}, Settings: tt.settings}
			v, c, at := FromBuildInfo(tt.version, tt.commit, bi)
			if v != tt.wantV || c != tt.wantC || at != tt.wantT {
				t.Errorf("got %q %q %q; want %q %q %q", v, c, at, tt.wantV, tt.wantC, tt.wantT)
			}
		})
	}
}
