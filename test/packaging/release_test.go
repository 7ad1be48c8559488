package packaging

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// The SHA-256 of the Apache License 2.0 as the Apache Software Foundation
// publishes it (LICENSE-2.0.txt): LICENSE must be that text, unmodified.
const apache2SHA256 = "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"

// TestReleaseArchives runs make dist's script for this machine's platform
// and checks what a user downloads: SHA256SUMS verifies, the archive holds
// the binary, the license, the changelog, the README and the SQL; the
// binary is static and says its version; the SBOM names every module linked
// into it at the version linked, and the binary's hash.
func TestReleaseArchives(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF inspection: linux only")
	}
	if b, err := os.ReadFile(filepath.Join(root(t), "LICENSE")); err != nil || sha256Hex(b) != apache2SHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0 text, unmodified (%v)", err)
	}
	if testing.Short() {
		t.Skip("the rest builds the release archive twice (about 10 s); make test runs it")
	}
	dist, again := releaseDists(t)
	sums := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	sums.Dir = dist
	if out, err := sums.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check: %v\n%s", err, out)
	}
	name := "outbox-cdc_" + distVersion + "_linux_" + runtime.GOARCH
	if a, b := fileSHA(t, filepath.Join(dist, name+".tar.gz")), fileSHA(t, filepath.Join(again, name+".tar.gz")); a != b {
		t.Errorf("the archive built under umask 0002 (%s) differs from the one built under 0077 (%s)", a, b)
	}
	checkModes(t, filepath.Join(dist, name+".tar.gz"))

	unpacked := t.TempDir()
	files := untar(t, filepath.Join(dist, name+".tar.gz"), unpacked)
	want := []string{"CHANGELOG.md", "LICENSE", "NOTICE", "README.md", "outbox-cdc", "outbox_emit.sql", "publication.sql"}
	if strings.Join(files, " ") != strings.Join(prefixed(name+"/", want), " ") {
		t.Errorf("archive holds %v; want %v under %s/", files, want, name)
	}
	bin := filepath.Join(unpacked, name, "outbox-cdc")
	checkStatic(t, bin)
	if v, err := exec.Command(bin, "--version").Output(); err != nil || !strings.HasPrefix(string(v), "outbox-cdc "+distVersion+" (commit abc1234") {
		t.Errorf("--version: %q %v", v, err)
	}
	checkSBOM(t, filepath.Join(dist, name+".spdx.json"), bin, distVersion)
}

// The version, commit and time make dist is run with by the tests.
const (
	distVersion = "v0.0.0-disttest"
	distEpoch   = 1700000000
)

// dists is make dist's output for this machine's platform, built once for
// the package's tests, under umask 0002 and again under 0077: two builds of
// one commit are byte-identical whatever the builder's umask.
var dists struct {
	once        sync.Once
	dir         string // removed by TestMain
	dist, again string
	err         error
}

func releaseDists(t *testing.T) (dist, again string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("make dist's packages and ELF inspection: linux only")
	}
	dists.once.Do(func() {
		if dists.dir, dists.err = os.MkdirTemp("", "outbox-cdc-dist"); dists.err != nil {
			return
		}
		dists.dist, dists.err = releaseDist(filepath.Join(dists.dir, "0002"), "0002")
		if dists.err == nil {
			dists.again, dists.err = releaseDist(filepath.Join(dists.dir, "0077"), "0077")
		}
	})
	if dists.err != nil {
		t.Fatal(dists.err)
	}
	return dists.dist, dists.again
}

// releaseDist runs make dist's script for this machine's platform under
// umask, writing to dist.
func releaseDist(dist, umask string) (string, error) {
	r, err := testkit.Root()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("sh", "-c", "umask "+umask+" && exec scripts/release.sh dist")
	cmd.Dir = r
	cmd.Env = append(os.Environ(), "VERSION="+distVersion, "COMMIT=abc1234", "DIST="+dist,
		"PLATFORMS=linux/"+runtime.GOARCH, fmt.Sprintf("SOURCE_DATE_EPOCH=%d", distEpoch))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("scripts/release.sh dist (umask %s): %w\n%s", umask, err, out)
	}
	return dist, nil
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Hex(b)
}

// checkModes: in the archive the binary and folders are 0755, every other
// file 0644, all owned by root.
func checkModes(t *testing.T, path string) {
	t.Helper()
	eachEntry(t, path, func(h *tar.Header, _ io.Reader) {
		want := int64(0o644)
		if h.Typeflag == tar.TypeDir || filepath.Base(h.Name) == "outbox-cdc" {
			want = 0o755
		}
		if h.Mode&0o7777 != want || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mode %04o uid %d gid %d, want %04o root", h.Name, h.Mode&0o7777, h.Uid, h.Gid, want)
		}
	})
}

// eachEntry calls fn with each entry of a .tar.gz, in the archive's order.
func eachEntry(t *testing.T, path string, fn func(h *tar.Header, r io.Reader)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		fn(h, tr)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func prefixed(p string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, p+n)
	}
	return out
}

// untar extracts a .tar.gz into dir and returns its files' names, sorted.
func untar(t *testing.T, path, dir string) []string {
	t.Helper()
	var names []string
	eachEntry(t, path, func(h *tar.Header, r io.Reader) {
		if h.Typeflag != tar.TypeReg {
			return
		}
		names = append(names, h.Name)
		dst := filepath.Join(dir, filepath.Clean(h.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		if err := os.WriteFile(dst, b, os.FileMode(h.Mode)&0o755); err != nil {
			t.Fatal(err)
		}
	})
	sort.Strings(names)
	return names
}

// checkStatic: the binary needs no dynamic loader, so it runs on a scratch
// image and under chroot.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary asks for a dynamic loader")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v", libs)
	}
}

func checkSBOM(t *testing.T, path, bin, version string) {
	t.Helper()
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
			Checksums   []struct {
				Value string `json:"checksumValue"`
			} `json:"checksums"`
		} `json:"packages"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.SPDXVersion != "SPDX-2.3" || len(doc.Packages) < 2 {
		t.Fatalf("%s: %v, %s, %d packages", path, err, doc.SPDXVersion, len(doc.Packages))
	}
	raw, _ := os.ReadFile(bin)
	if m := doc.Packages[0]; m.VersionInfo != version || len(m.Checksums) != 1 || m.Checksums[0].Value != sha256Hex(raw) {
		t.Errorf("the SBOM's first package is not this binary at %s: %+v", version, m)
	}
	listed := map[string]string{}
	for _, p := range doc.Packages {
		listed[p.Name] = p.VersionInfo
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range bi.Deps {
		if listed[m.Path] != m.Version {
			t.Errorf("the SBOM lists %s at %q; the binary links %s", m.Path, listed[m.Path], m.Version)
		}
	}
	if len(bi.Deps) < 10 || listed["stdlib"] != strings.Fields(bi.GoVersion)[0] {
		t.Errorf("%d modules in the binary; stdlib %q for %s", len(bi.Deps), listed["stdlib"], bi.GoVersion)
	}
}
