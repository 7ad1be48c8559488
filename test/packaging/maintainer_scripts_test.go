package packaging

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// scratchRoot is a host's /etc and /run in a folder of the test's, which
// the maintainer scripts see as /etc and /run in a mount namespace of their
// own: a real useradd or adduser writes the folder's passwd and group, and
// a stand-in systemctl writes down what it is asked.
type scratchRoot struct {
	dir, bin string
}

func newScratchRoot(t *testing.T, tools []string) scratchRoot {
	t.Helper()
	r := scratchRoot{dir: t.TempDir(), bin: t.TempDir()}
	for _, d := range []string{"etc/outbox-cdc", "run/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
		"etc/shadow": "root:*:19000:0:99999:7:::\n", "etc/gshadow": "root:*::\n",
	} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// What useradd, adduser and their PAM calls read of /etc.
	for _, keep := range []string{"pam.d", "pam.conf", "security", "login.defs", "adduser.conf", "default"} {
		if _, err := os.Stat("/etc/" + keep); err == nil {
			if out, err := exec.Command("cp", "-a", "/etc/"+keep, filepath.Join(r.dir, "etc")).CombinedOutput(); err != nil {
				t.Fatalf("cp /etc/%s: %v %s", keep, err, out)
			}
		}
	}
	for _, tool := range append([]string{"getent", "chown", "chmod"}, tools...) {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found", tool)
		}
		if err := os.Symlink(path, filepath.Join(r.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	stub := "#!/bin/sh\necho \"$*\" >>/run/systemctl.calls\n"
	if err := os.WriteFile(filepath.Join(r.bin, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs a maintainer script with args as the package manager would,
// with only the scratch root's tools on PATH.
func (r scratchRoot) run(t *testing.T, script string, args ...string) {
	t.Helper()
	path := filepath.Join(root(t), "deploy", "packages", "scripts", script)
	shell := fmt.Sprintf("mount --bind %s/etc /etc && mount --bind %s/run /run && exec env -i PATH=%s /bin/sh \"$@\"", r.dir, r.dir, r.bin)
	cmd := exec.Command("unshare", append([]string{"--mount", "sh", "-ec", shell, "sh", path}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

func (r scratchRoot) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// calls are what systemctl was asked since the last look.
func (r scratchRoot) calls(t *testing.T) string {
	t.Helper()
	calls := r.read(t, "run/systemctl.calls")
	os.Remove(filepath.Join(r.dir, "run/systemctl.calls"))
	return strings.TrimSpace(calls)
}

// unpack stands for the package manager writing the settings files, owned
// by root (as when the group is unknown at unpacking).
func (r scratchRoot) unpack(t *testing.T) {
	t.Helper()
	for _, f := range []string{"outbox-cdc.yaml", "outbox-cdc.env"} {
		path := filepath.Join(r.dir, "etc/outbox-cdc", f)
		if err := os.WriteFile(path, []byte("# "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMaintainerScripts installs, upgrades and removes the package as
// dpkg and rpm call its scripts, in a scratch root: the install creates
// the system user and group outbox-cdc (with useradd, or Debian's adduser
// alone) and gives the secrets file to that group, mode 0640, and starts
// nothing; an upgrade creates no second user, keeps the operator's modes
// and restarts what runs; removal stops the relays and leaves the user.
func TestMaintainerScripts(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("needs root on linux, for a mount namespace (unshare) and chown; CI runs as root")
	}
	tool(t, "unshare", "apt-get install util-linux", "runs the maintainer scripts in a scratch root")
	type step struct{ install, upgrade, remove [][]string } // each a script and its arguments
	deb := step{
		install: [][]string{{"preinstall.sh", "install"}, nil, {"postinstall.sh", "configure", ""}},
		upgrade: [][]string{{"preremove.sh", "upgrade", "0.2.0"}, {"preinstall.sh", "upgrade", "0.1.0"}, {"postremove.sh", "upgrade", "0.2.0"}, {"postinstall.sh", "configure", "0.1.0"}},
		remove:  [][]string{{"preremove.sh", "remove"}, {"postremove.sh", "remove"}, {"postremove.sh", "purge"}},
	}
	rpm := step{
		install: [][]string{{"preinstall.sh", "1"}, nil, {"postinstall.sh", "1"}},
		upgrade: [][]string{{"preinstall.sh", "2"}, {"postinstall.sh", "2"}, {"preremove.sh", "1"}, {"postremove.sh", "1"}},
		remove:  [][]string{{"preremove.sh", "0"}, {"postremove.sh", "0"}},
	}
	for _, tt := range []struct {
		name  string
		tools []string
		calls step
	}{
		{"deb with useradd", []string{"useradd", "groupadd"}, deb},
		{"deb with adduser alone", []string{"adduser", "addgroup"}, deb},
		{"rpm", []string{"useradd", "groupadd"}, rpm},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newScratchRoot(t, tt.tools)
			steps := func(calls [][]string) {
				for _, c := range calls {
					if c == nil {
						r.unpack(t)
						continue
					}
					r.run(t, c[0], c[1:]...)
				}
			}
			steps(tt.calls.install)
			passwd, group := r.read(t, "etc/passwd"), r.read(t, "etc/group")
			checkSystemUser(t, passwd, group)
			env := filepath.Join(r.dir, "etc/outbox-cdc/outbox-cdc.env")
			checkOwner(t, env, 0o640, group)
			checkOwner(t, filepath.Join(r.dir, "etc/outbox-cdc/outbox-cdc.yaml"), 0o640, group)
			if calls := r.calls(t); calls != "daemon-reload" {
				t.Errorf("install: systemctl %q; want daemon-reload alone (nothing starts before the settings are written)", calls)
			}

			if err := os.Chmod(env, 0o600); err != nil { // the operator's choice
				t.Fatal(err)
			}
			steps(tt.calls.upgrade)
			if p, g := r.read(t, "etc/passwd"), r.read(t, "etc/group"); p != passwd || g != group {
				t.Errorf("the upgrade changed the users or groups:\n%s\n%s", p, g)
			}
			checkOwner(t, env, 0o600, group)
			if calls := r.calls(t); !strings.Contains(calls, "try-restart outbox-cdc.service outbox-cdc@*.service") || strings.Contains(calls, "stop") {
				t.Errorf("upgrade: systemctl %q; want the running relays restarted, none stopped", calls)
			}

			steps(tt.calls.remove)
			if p, g := r.read(t, "etc/passwd"), r.read(t, "etc/group"); p != passwd || g != group {
				t.Errorf("the removal changed the users or groups:\n%s\n%s", p, g)
			}
			if calls := r.calls(t); !strings.Contains(calls, "disable --now outbox-cdc.service\nstop outbox-cdc@*.service") {
				t.Errorf("remove: systemctl %q; want the relays stopped", calls)
			}
		})
	}
}

// checkSystemUser: passwd and group hold a system user outbox-cdc (an id
// under 1000) with a group of its name, no shell and no home.
func checkSystemUser(t *testing.T, passwd, group string) {
	t.Helper()
	var uid, gid int
	var home, shell string
	for _, line := range strings.Split(passwd, "\n") {
		f := strings.Split(line, ":")
		if f[0] == "outbox-cdc" && len(f) == 7 {
			fmt.Sscan(f[2], &uid)
			fmt.Sscan(f[3], &gid)
			home, shell = f[5], f[6]
		}
	}
	if uid <= 0 || uid >= 1000 || home != "/nonexistent" || !strings.HasSuffix(shell, "/nologin") {
		t.Errorf("no system user outbox-cdc (uid %d, home %q, shell %q) in\n%s", uid, home, shell, passwd)
	}
	if groupID(group) != gid || gid <= 0 {
		t.Errorf("the user's group %d is not outbox-cdc's, in\n%s", gid, group)
	}
}

func groupID(group string) int {
	for _, line := range strings.Split(group, "\n") {
		if f := strings.Split(line, ":"); f[0] == "outbox-cdc" && len(f) == 4 {
			var gid int
			fmt.Sscan(f[2], &gid)
			return gid
		}
	}
	return -1
}

// checkOwner: path has mode perm, owner root and group outbox-cdc.
func checkOwner(t *testing.T, path string, perm os.FileMode, group string) {
	t.Helper()
	var st struct{ uid, gid int }
	out, err := exec.Command("stat", "-c", "%u %g %a", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	fmt.Sscan(string(out), &st.uid, &st.gid, &mode)
	if st.uid != 0 || st.gid != groupID(group) || mode != fmt.Sprintf("%o", perm) {
		t.Errorf("%s: uid %d gid %d mode %s, want root, outbox-cdc (%d), %o", filepath.Base(path), st.uid, st.gid, mode, groupID(group), perm)
	}
}
