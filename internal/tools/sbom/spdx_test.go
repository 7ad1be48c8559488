package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func testBuildInfo() *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Path:      "github.com/outbox-cdc/outbox-cdc/cmd/outbox-cdc",
		Main:      debug.Module{Path: "github.com/outbox-cdc/outbox-cdc", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/jackc/pgx/v5", Version: "v5.12.0", Sum: "h1:hWwax8YiGT0YiN50U1oIDn5kgR7KC2tG3rmavwpPkxY="},
			{Path: "github.com/a/b", Version: "v1.0.0", Replace: &debug.Module{Path: "github.com/fork/b", Version: "v1.0.1", Sum: "h1:x"}},
			{Path: "github.com/a_b", Version: "v1.0.0"}, // sanitized alike with the next
			{Path: "github.com/a-b", Version: "v1.0.0"},
		},
		Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}},
	}
}

func TestNewDocument(t *testing.T) {
	a := artifact{
		Name: "outbox-cdc_v0.1.0_linux_arm64", File: "outbox-cdc", Version: "v0.1.0", SHA256: "ab12",
		Source: "https://github.com/outbox-cdc/outbox-cdc", License: "Apache-2.0",
		Supplier: "Organization: The outbox-cdc authors", CreatedAt: time.Unix(1795996800, 0),
	}
	d := newDocument(a, testBuildInfo())
	if d.SPDXVersion != "SPDX-2.3" || d.DataLicense != "CC0-1.0" || d.CreationInfo.Created != "2026-11-30T00:00:00Z" {
		t.Errorf("header: %s %s %s", d.SPDXVersion, d.DataLicense, d.CreationInfo.Created)
	}
	if d.DocumentNamespace != "https://github.com/outbox-cdc/outbox-cdc/spdx/outbox-cdc_v0.1.0_linux_arm64-ab12" {
		t.Errorf("namespace %s", d.DocumentNamespace)
	}
	main := d.Packages[0]
	if main.VersionInfo != "v0.1.0" || main.LicenseDeclared != "Apache-2.0" || main.Checksums[0].Value != "ab12" ||
		main.ExternalRefs[0].Locator != "pkg:golang/github.com/outbox-cdc/outbox-cdc@v0.1.0" ||
		!strings.Contains(main.Comment, "GOARCH=arm64") || !strings.Contains(main.Comment, "CGO_ENABLED=0") {
		t.Errorf("main package: %+v", main)
	}
	want := map[string]string{ // name: purl
		"stdlib":                  "pkg:golang/stdlib@go1.26.8",
		"github.com/jackc/pgx/v5": "pkg:golang/github.com/jackc/pgx/v5@v5.12.0",
		"github.com/fork/b":       "pkg:golang/github.com/fork/b@v1.0.1",
		"github.com/a_b":          "pkg:golang/github.com/a_b@v1.0.0",
		"github.com/a-b":          "pkg:golang/github.com/a-b@v1.0.0",
	}
	ids := map[string]bool{}
	valid := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	for _, p := range d.Packages {
		if ids[p.SPDXID] || !valid.MatchString(p.SPDXID) {
			t.Errorf("SPDXID %q repeated or invalid", p.SPDXID)
		}
		ids[p.SPDXID] = true
		if p.Name == main.Name {
			continue
		}
		if want[p.Name] != p.ExternalRefs[0].Locator {
			t.Errorf("%s: purl %s; want %s", p.Name, p.ExternalRefs[0].Locator, want[p.Name])
		}
		delete(want, p.Name)
	}
	if len(want) > 0 {
		t.Errorf("missing packages %v", want)
	}
	if got := d.Packages[3].Comment; got != "replaces github.com/a/b v1.0.0; go.sum h1:x" {
		t.Errorf("replaced module's comment %q", got)
	}
	if len(d.Relationships) != len(d.Packages) { // DESCRIBES main, main DEPENDS_ON each other one
		t.Errorf("%d relationships for %d packages", len(d.Relationships), len(d.Packages))
	}
	for _, r := range d.Relationships {
		if !ids[r.Related] {
			t.Errorf("relationship to unknown %s", r.Related)
		}
	}
}

// TestRunOnABinary writes the document of this test's own binary, which
// carries build information as any Go binary does.
func TestRunOnABinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sbom.json")
	if err := run([]string{"-version", "v0.1.0", "-o", out, self}, "1795996800", &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	for _, k := range []string{"spdxVersion", "dataLicense", "SPDXID", "name", "documentNamespace", "creationInfo", "packages", "relationships"} {
		if d[k] == nil {
			t.Errorf("no %s", k)
		}
	}
	if err := run([]string{"-o", out, os.DevNull}, "", &bytes.Buffer{}); err == nil {
		t.Errorf("no error for a file that is not a Go binary")
	}
	if err := run([]string{self}, "soon", &bytes.Buffer{}); err == nil {
		t.Errorf("no error for a bad SOURCE_DATE_EPOCH")
	}
}
