package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// packagedFile is a file the packages install: its mode and owner as
// `dpkg-deb --contents` prints them, and the repository file it holds (""
// for the binary).
type packagedFile struct {
	perms, owner, src string
}

// packagedFiles are the files of the .deb (units in /lib) or the .rpm (in
// /usr/lib), by path.
func packagedFiles(unitDir string) map[string]packagedFile {
	return map[string]packagedFile{
		"/usr/bin/outbox-cdc":               {"-rwxr-xr-x", "root/root", ""},
		unitDir + "/outbox-cdc.service":     {"-rw-r--r--", "root/root", "deploy/systemd/outbox-cdc.service"},
		unitDir + "/outbox-cdc@.service":    {"-rw-r--r--", "root/root", "deploy/systemd/outbox-cdc@.service"},
		"/etc/outbox-cdc/outbox-cdc.yaml":   {"-rw-r-----", "root/outbox-cdc", "deploy/packages/outbox-cdc.yaml"},
		"/etc/outbox-cdc/outbox-cdc.env":    {"-rw-r-----", "root/outbox-cdc", "deploy/packages/outbox-cdc.env"},
		"/usr/share/doc/outbox-cdc/LICENSE": {"-rw-r--r--", "root/root", "LICENSE"},
		"/usr/share/doc/outbox-cdc/NOTICE":  {"-rw-r--r--", "root/root", "NOTICE"},
	}
}

// The maintainer scripts, by dpkg's name for each.
var maintainerScripts = map[string]string{
	"preinst": "preinstall.sh", "postinst": "postinstall.sh", "prerm": "preremove.sh", "postrm": "postremove.sh",
}

// TestReleasePackages checks the .deb and .rpm that make dist writes for
// this machine's architecture: built twice (under two umasks) they are
// byte-identical, SHA256SUMS lists them, each has an SBOM of the binary it
// holds, which is the archive's; and what each installs, with which modes,
// owners and times, its settings kept on upgrade, and its maintainer
// scripts.
func TestReleasePackages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release twice (about 40 s); make test runs it")
	}
	dist, again := releaseDists(t)
	name := "outbox-cdc_" + distVersion + "_linux_" + runtime.GOARCH
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	unpacked := t.TempDir()
	untar(t, filepath.Join(dist, name+".tar.gz"), unpacked)
	bin := filepath.Join(unpacked, name, "outbox-cdc")
	for _, ext := range []string{"deb", "rpm"} {
		pkg := name + "." + ext
		if a, b := fileSHA(t, filepath.Join(dist, pkg)), fileSHA(t, filepath.Join(again, pkg)); a != b {
			t.Errorf("%s built under umask 0002 (%s) differs from the one built under 0077 (%s)", pkg, a, b)
		}
		for _, f := range []string{pkg, pkg + ".spdx.json"} {
			if !strings.Contains(string(sums), fileSHA(t, filepath.Join(dist, f))+"  "+f+"\n") {
				t.Errorf("SHA256SUMS does not list %s", f)
			}
		}
		checkSBOM(t, filepath.Join(dist, pkg+".spdx.json"), bin, distVersion)
	}
	t.Run("deb", func(t *testing.T) { checkDeb(t, filepath.Join(dist, name+".deb"), bin) })
	t.Run("rpm", func(t *testing.T) { checkRPM(t, filepath.Join(dist, name+".rpm"), bin) })
}

// checkDeb reads the .deb with dpkg-deb: its control fields, conffiles and
// maintainer scripts, and the files it installs.
func checkDeb(t *testing.T, deb, bin string) {
	tool(t, "dpkg-deb", "apt-get install dpkg", "reads the .deb's control fields, conffiles, scripts and files")
	info := dpkgDeb(t, "--info", deb)
	for _, field := range []string{"Package: outbox-cdc", "Version: 0.0.0~disttest-1", "Architecture: " + runtime.GOARCH,
		"Section: net", "Homepage: https://github.com/outbox-cdc/outbox-cdc"} {
		if !strings.Contains(info, "\n "+field+"\n") {
			t.Errorf("dpkg-deb --info has no %q:\n%s", field, info)
		}
	}
	control := t.TempDir()
	dpkgDeb(t, "--control", deb, control)
	if b, _ := os.ReadFile(filepath.Join(control, "conffiles")); string(b) != "/etc/outbox-cdc/outbox-cdc.env\n/etc/outbox-cdc/outbox-cdc.yaml\n" {
		t.Errorf("conffiles: %q", b)
	}
	for deb, src := range maintainerScripts {
		checkSameFile(t, filepath.Join(control, deb), filepath.Join(root(t), "deploy", "packages", "scripts", src))
		if fi, err := os.Stat(filepath.Join(control, deb)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v, want mode 0755", deb, fi, err)
		}
	}

	want := packagedFiles("/lib/systemd/system")
	date := time.Unix(distEpoch, 0).UTC().Format("2006-01-02 15:04")
	entry := regexp.MustCompile(`^(\S+) (\S+) +\d+ (\S+ \S+) \.(/.*)$`)
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(dpkgDeb(t, "--contents", deb)), "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("dpkg-deb --contents: %q", line)
		}
		perms, owner, when, path := m[1], m[2], m[3], strings.TrimSuffix(m[4], "/")
		if when != date {
			t.Errorf("%s: time %s, want SOURCE_DATE_EPOCH's %s", path, when, date)
		}
		if strings.HasPrefix(perms, "d") {
			if perms != "drwxr-xr-x" || owner != "root/root" {
				t.Errorf("%s/: %s %s, want drwxr-xr-x root/root", path, perms, owner)
			}
			continue
		}
		files = append(files, path)
		if w := want[path]; perms != w.perms || owner != w.owner {
			t.Errorf("%s: %s %s, want %s %s", path, perms, owner, w.perms, w.owner)
		}
	}
	checkFileList(t, files, want)
	data := t.TempDir()
	dpkgDeb(t, "--extract", deb, data)
	for path, w := range want {
		src := bin
		if w.src != "" {
			src = filepath.Join(root(t), w.src)
		}
		checkSameFile(t, filepath.Join(data, path), src)
	}
}

// checkRPM reads the .rpm's header: its metadata, scripts, dependencies,
// and each file's mode, owner, flags, time and SHA-256. Where rpm is
// installed, its list of the files is held against the header's.
func checkRPM(t *testing.T, rpm, bin string) {
	h, err := readRPM(rpm)
	if err != nil {
		t.Fatal(err)
	}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	for tag, want := range map[int32]string{rpmTagName: "outbox-cdc", rpmTagVersion: "0.0.0~disttest", rpmTagRelease: "1",
		rpmTagArch: arch, rpmTagLicense: "Apache-2.0", rpmTagBuildHost: "localhost"} {
		if got := h.str(tag); got != want {
			t.Errorf("tag %d: %q, want %q", tag, got, want)
		}
	}
	if bt := h.ints(rpmTagBuildTime); len(bt) != 1 || bt[0] != distEpoch {
		t.Errorf("build time %v, want SOURCE_DATE_EPOCH %d", bt, distEpoch)
	}
	if req := h.strs(rpmTagRequireName); !slices.Contains(req, "shadow-utils") {
		t.Errorf("requires %v: want shadow-utils, for useradd", req)
	}
	for tag, src := range map[int32]string{rpmTagPreIn: "preinstall.sh", rpmTagPostIn: "postinstall.sh", rpmTagPreUn: "preremove.sh", rpmTagPostUn: "postremove.sh"} {
		b, err := os.ReadFile(filepath.Join(root(t), "deploy", "packages", "scripts", src))
		if err != nil {
			t.Fatal(err)
		}
		if h.str(tag) != string(b) {
			t.Errorf("the rpm's script %d is not %s:\n%s", tag, src, h.str(tag))
		}
	}

	got, err := h.files()
	if err != nil {
		t.Fatal(err)
	}
	want := packagedFiles("/usr/lib/systemd/system")
	var files []string
	for path, f := range got {
		if f.MTime != distEpoch {
			t.Errorf("%s: time %d, want SOURCE_DATE_EPOCH %d", path, f.MTime, distEpoch)
		}
		if path == "/etc/outbox-cdc" || path == "/usr/share/doc/outbox-cdc" {
			if f.Mode != 0o40755 || f.User != "root" || f.Group != "root" {
				t.Errorf("%s: mode %o %s/%s, want a directory 0755 of root", path, f.Mode, f.User, f.Group)
			}
			continue
		}
		files = append(files, path)
		w := want[path]
		if perms := os.FileMode(f.Mode & 0o777).String(); perms != w.perms || f.User+"/"+f.Group != w.owner {
			t.Errorf("%s: %s %s/%s, want %s %s", path, perms, f.User, f.Group, w.perms, w.owner)
		}
		src := bin
		if w.src != "" {
			src = filepath.Join(root(t), w.src)
		}
		if f.SHA256 != fileSHA(t, src) {
			t.Errorf("%s does not hold %s", path, src)
		}
		wantFlags := map[string]int64{"/etc/outbox-cdc/outbox-cdc.yaml": rpmFileConfig | rpmFileNoReplace,
			"/etc/outbox-cdc/outbox-cdc.env":    rpmFileConfig | rpmFileNoReplace,
			"/usr/share/doc/outbox-cdc/LICENSE": rpmFileLicense, "/usr/share/doc/outbox-cdc/NOTICE": rpmFileLicense}[path]
		if f.Flags != wantFlags {
			t.Errorf("%s: file flags %#x, want %#x", path, f.Flags, wantFlags)
		}
	}
	checkFileList(t, files, want)

	if _, err := exec.LookPath("rpm"); err == nil {
		out, err := exec.Command("rpm", "-qpl", rpm).Output()
		if err != nil {
			t.Fatalf("rpm -qpl: %v", err)
		}
		var listed []string
		for path := range got {
			listed = append(listed, path)
		}
		slices.Sort(listed)
		if strings.TrimSpace(string(out)) != strings.Join(listed, "\n") {
			t.Errorf("rpm -qpl lists\n%s\nthe header read here\n%s", out, strings.Join(listed, "\n"))
		}
	}
}

func dpkgDeb(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("dpkg-deb", args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dpkg-deb %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// checkFileList: the package's files are exactly want's.
func checkFileList(t *testing.T, files []string, want map[string]packagedFile) {
	t.Helper()
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	slices.Sort(files)
	if !slices.Equal(files, paths) {
		t.Errorf("the package installs\n%s\nwant\n%s", strings.Join(files, "\n"), strings.Join(paths, "\n"))
	}
}

func checkSameFile(t *testing.T, got, want string) {
	t.Helper()
	if fileSHA(t, got) != fileSHA(t, want) {
		t.Errorf("%s differs from %s", got, want)
	}
}
