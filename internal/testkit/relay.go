package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RelayCommand is one outbox-cdc process to start.
type RelayCommand struct {
	Binary string   // the build under test (BuildRelay)
	Args   []string // its flags (Outbox.Args)
	Env    []string // added to the test's own environment

	// PostgresURL is where StartRelay waits for the slot the args name to
	// be active: rows committed before the slot exists are not in its
	// stream. NoWait returns at once instead, for a relay that backfills
	// first or is expected to fail.
	PostgresURL string
	NoWait      bool
}

// Relay is a running outbox-cdc process. It is killed, by its PID, when the
// test ends, however it ends; when the test failed, it is asked for a
// goroutine dump first (SIGQUIT) and the end of its log is logged.
type Relay struct {
	Cmd     *exec.Cmd
	Log     string // the file its stdout and stderr go to
	Started time.Time

	done chan struct{}
	err  error // Wait's, set before done is closed
}

// StartRelay starts c.Binary and, unless c.NoWait, waits until its slot
// streams.
func StartRelay(t testing.TB, c RelayCommand) *Relay {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "outbox-cdc.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// If the test process itself is killed, no cleanup runs: the kernel
	// stops the relay with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start outbox-cdc: %v", err)
	}
	r := &Relay{Cmd: cmd, Log: logPath, Started: time.Now(), done: make(chan struct{})}
	go func() { // waited for by the cleanup
		r.err = cmd.Wait()
		f.Close()
		close(r.done)
	}()
	t.Cleanup(func() { r.kill(t) })
	if !c.NoWait {
		r.WaitStreaming(t, c.PostgresURL)
	}
	return r
}

// kill ends the process and, when the test failed, keeps its log: the end
// in the test's output, the whole in the temp directory.
func (r *Relay) kill(t testing.TB) {
	if !t.Failed() {
		_ = r.Cmd.Process.Kill()
		<-r.done
		return
	}
	signalThenKill(r.Cmd.Process, r.done, syscall.SIGQUIT, 5*time.Second) // a goroutine dump in the log
	b, _ := os.ReadFile(r.Log)
	kept := filepath.Join(os.TempDir(), fmt.Sprintf("outbox-cdc-failed-%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), r.Cmd.Process.Pid)) // a test's relays one file each
	_ = os.WriteFile(kept, b, 0o644)
	t.Logf("outbox-cdc log (pid %d, kept at %s):\n%s", r.Cmd.Process.Pid, kept, Tail(string(b), 40))
}

// signalThenKill sends sig, gives the process grace to exit on it, kills
// it if it has not, and waits until done (closed once Wait returned).
func signalThenKill(p *os.Process, done <-chan struct{}, sig os.Signal, grace time.Duration) {
	_ = p.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.Kill()
		<-done
	}
}

// WaitStreaming waits up to a minute until the slot the relay's --slot
// names (outbox_cdc by default) is streamed in the Postgres at pgURL: held
// by a walsender that started replication (pg_stat_replication's state
// catchup or streaming). A slot the relay creates is active for a moment
// under the connection that creates it (state startup), before the stream
// takes it: TestPostgresTLS once found no walsender on the slot just
// after. The relay exiting first fails the test.
func (r *Relay) WaitStreaming(t testing.TB, pgURL string) {
	t.Helper()
	slot := "outbox_cdc"
	for i, a := range r.Cmd.Args {
		if a == "--slot" && i+1 < len(r.Cmd.Args) {
			slot = r.Cmd.Args[i+1]
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		var active bool
		err := conn.QueryRow(ctx, `SELECT r.active FROM pg_replication_slots r JOIN pg_stat_replication s ON s.pid = r.active_pid
			WHERE r.slot_name = $1 AND s.state IN ('catchup', 'streaming')`, slot).Scan(&active)
		if err == nil && active {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("outbox-cdc exited before streaming: %v\n%s", r.err, Tail(r.LogText(), 20))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not active a minute after outbox-cdc started", slot)
		}
	}
}

// Done is closed once the process has exited.
func (r *Relay) Done() <-chan struct{} { return r.done }

// Err is how the process ended (exec.Cmd.Wait's error), once Done is
// closed.
func (r *Relay) Err() error { return r.err }

// Stop sends sig and returns the exit code, failing the test if the
// process has not exited within timeout.
func (r *Relay) Stop(t testing.TB, sig syscall.Signal, timeout time.Duration) int {
	t.Helper()
	_ = r.Cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("outbox-cdc did not exit within %s of %s", timeout, sig)
	}
	var exit *exec.ExitError
	if errors.As(r.err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// LogText returns the relay's whole log.
func (r *Relay) LogText() string {
	b, _ := os.ReadFile(r.Log)
	return string(b)
}

var addrRE = regexp.MustCompile(`serving metrics and probes"? addr=(\S+)`)

// HTTPAddr returns the address the relay serves metrics and probes on, as
// it logged it (it listens on port 0), waiting up to 30 s for the line.
func (r *Relay) HTTPAddr(t testing.TB) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(r.Log)
		if m := addrRE.FindSubmatch(b); m != nil {
			return string(m[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the relay logged no metrics address")
	return ""
}

// Get asks the relay's HTTP server for path: its status and body.
func (r *Relay) Get(t testing.TB, path string) (int, string) {
	t.Helper()
	return Get(t, "http://"+r.HTTPAddr(t)+path)
}

// Readyz is the relay's /readyz answer: its status and body.
func (r *Relay) Readyz(t testing.TB) (int, string) {
	t.Helper()
	return r.Get(t, "/readyz")
}

// Metric returns the value of one series on the relay's /metrics, written
// as it is there (`name{label="value"}`), 0 when absent.
func (r *Relay) Metric(t testing.TB, series string) float64 {
	t.Helper()
	m, _ := Scrape(t, r.HTTPAddr(t))
	return m[series]
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
