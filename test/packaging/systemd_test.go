package packaging

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/config"
)

// unitFile is a systemd unit file's directives, by section and key, in
// the order written (a key may repeat).
type unitFile map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is no directive", path, line)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

// one is the value of a directive written once.
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("%s is set %d times, want once", key, len(u[key]))
	}
	return u[key][0]
}

func (u unitFile) duration(t *testing.T, key string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(strings.ReplaceAll(u.one(t, key), "min", "m"))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return d
}

// runDefaults are `outbox-cdc run`'s settings when only the required
// ones are given.
func runDefaults(t *testing.T) config.Config {
	t.Helper()
	c, err := config.Parse(config.CmdRun, []string{"--postgres-url", "postgres://u@h/db", "--kafka-brokers", "k:9092"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSystemdUnitsFitTheRelay holds deploy/systemd's units to the binary:
// ExecStart runs `run` with flags it takes, the stop timeout outlasts the
// default drain, the watchdog outlasts the replication loop's longest
// healthy pause, and the template is the unit but for its instance's files.
func TestSystemdUnitsFitTheRelay(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "systemd")
	u := readUnit(t, filepath.Join(dir, "outbox-cdc.service"))
	for key, want := range map[string]string{
		"Service.Type": "notify", "Service.NotifyAccess": "main", "Service.User": "outbox-cdc", "Service.Group": "outbox-cdc",
		"Service.Restart": "on-failure", "Service.KillMode": "mixed", "Service.EnvironmentFile": "/etc/outbox-cdc/outbox-cdc.env",
		"Service.ExecStart": "/usr/bin/outbox-cdc run --config /etc/outbox-cdc/outbox-cdc.yaml",
		// A usage error (exit 2) is a setting to fix: restarting cannot help.
		"Service.RestartPreventExitStatus": "2",
		// But the Go runtime also exits 2 on a panic, a fatal error and
		// the watchdog's SIGABRT, unless GOTRACEBACK=crash makes it die by
		// the signal: without it, a hung or crashed relay stays down.
		"Service.Environment": "GOTRACEBACK=crash", "Service.LimitCORE": "0",
	} {
		if got := u.one(t, key); got != want {
			t.Errorf("%s=%s, want %s", key, got, want)
		}
	}
	args := strings.Fields(u.one(t, "Service.ExecStart"))
	runFlags := commandFlags(t)[config.CmdRun]
	for _, a := range args[2:] {
		if f, ok := strings.CutPrefix(a, "--"); ok && !runFlags[f] {
			t.Errorf("ExecStart passes --%s, which outbox-cdc run does not take", f)
		}
	}
	d := runDefaults(t)
	if stop := u.duration(t, "Service.TimeoutStopSec"); stop < d.Relay.Stream.DrainTimeout+10*time.Second {
		t.Errorf("TimeoutStopSec=%s leaves no margin over the default --drain-timeout %s", stop, d.Relay.Stream.DrainTimeout)
	}
	// The replication loop turns at least every --status-interval; the
	// relay pings at half of WatchdogSec.
	if wd := u.duration(t, "Service.WatchdogSec"); wd < 3*d.Relay.Stream.StatusInterval {
		t.Errorf("WatchdogSec=%s is under three times the default --status-interval %s", wd, d.Relay.Stream.StatusInterval)
	}

	tmpl := readUnit(t, filepath.Join(dir, "outbox-cdc@.service"))
	for key, want := range map[string]string{
		"Unit.Description":        "outbox-cdc %i: Postgres outbox to Kafka relay",
		"Service.ExecStart":       "/usr/bin/outbox-cdc run --config /etc/outbox-cdc/%i.yaml",
		"Service.EnvironmentFile": "/etc/outbox-cdc/%i.env",
	} {
		if got := tmpl.one(t, key); got != want {
			t.Errorf("outbox-cdc@.service: %s=%s, want %s", key, got, want)
		}
		tmpl[key] = u[key]
	}
	for key, v := range u {
		if strings.Join(tmpl[key], "\n") != strings.Join(v, "\n") {
			t.Errorf("outbox-cdc@.service: %s=%v; outbox-cdc.service has %v", key, tmpl[key], v)
		}
	}
	for key := range tmpl {
		if u[key] == nil {
			t.Errorf("outbox-cdc@.service sets %s, outbox-cdc.service does not", key)
		}
	}
}

// TestSystemdUnitsVerifyAndAreHardened: `systemd-analyze verify` has
// nothing to say of either unit, and `systemd-analyze security` rates each
// OK (exposure at most 2.0), offline, on the files. verify wants
// ExecStart's program to exist, so it reads copies that start a stand-in.
func TestSystemdUnitsVerifyAndAreHardened(t *testing.T) {
	tool(t, "systemd-analyze", "apt-get install systemd", "verifies the units and rates their sandbox offline")
	tmp := t.TempDir()
	program := filepath.Join(tmp, "outbox-cdc")
	if err := os.WriteFile(program, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exposure := regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+) (\S+)`)
	for file, instance := range map[string]string{"outbox-cdc.service": "outbox-cdc.service", "outbox-cdc@.service": "outbox-cdc@main.service"} {
		b, err := os.ReadFile(filepath.Join(root(t), "deploy", "systemd", file))
		if err != nil {
			t.Fatal(err)
		}
		copied := strings.ReplaceAll(string(b), "ExecStart=/usr/bin/outbox-cdc ", "ExecStart="+program+" ")
		if err := os.WriteFile(filepath.Join(tmp, file), []byte(copied), 0o644); err != nil {
			t.Fatal(err)
		}
		unit := filepath.Join(tmp, instance)
		if out, err := exec.Command("systemd-analyze", "verify", "--man=no", unit).CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", instance, err, out)
		}
		out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", unit).CombinedOutput()
		m := exposure.FindSubmatch(out)
		if err != nil || m == nil {
			t.Errorf("systemd-analyze security %s: %v\n%s", instance, err, out)
			continue
		}
		if score, _ := strconv.ParseFloat(string(m[1]), 64); score > 2.0 || string(m[2]) != "OK" {
			t.Errorf("%s: exposure %s %s, want at most 2.0 OK; exposed:\n%s", instance, m[1], m[2], exposed(out))
		}
		t.Logf("%s: exposure %s %s", instance, m[1], m[2])
	}
}

// exposed are the lines of `systemd-analyze security` that name a setting
// the unit lacks.
func exposed(out []byte) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "✗") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(lines, "\n")
}
