package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// notifySocket is a NOTIFY_SOCKET the test reads as systemd would: every
// datagram a relay sends, with when it arrived.
type notifySocket struct {
	path string
	conn *net.UnixConn

	mu  sync.Mutex
	got []notification
}

// notification is one datagram: newline-separated assignments.
type notification struct {
	at    time.Time
	state string
}

// has reports whether n holds an assignment starting with prefix
// (READY=1, or STATUS=standing by…).
func (n notification) has(prefix string) bool {
	for _, line := range strings.Split(n.state, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// listenNotify binds a unixgram socket, as systemd does for a Type=notify
// unit, and reads it until the test ends.
func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("bind %s: %v", path, err)
	}
	n := &notifySocket{path: path, conn: conn}
	var reading sync.WaitGroup
	reading.Go(func() {
		b := make([]byte, 64<<10)
		for {
			k, err := conn.Read(b)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.got = append(n.got, notification{time.Now(), string(b[:k])})
			n.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		conn.Close()
		reading.Wait()
		os.RemoveAll(dir)
	})
	return n
}

// env is the environment systemd gives a unit with WatchdogSec=watchdog.
func (n *notifySocket) env(watchdog time.Duration) []string {
	return []string{"NOTIFY_SOCKET=" + n.path, "WATCHDOG_USEC=" + strconv.FormatInt(watchdog.Microseconds(), 10)}
}

// all returns the notifications holding prefix, in order.
func (n *notifySocket) all(prefix string) []notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []notification
	for _, g := range n.got {
		if g.has(prefix) {
			out = append(out, g)
		}
	}
	return out
}

// wait returns the first notification holding prefix, waiting up to
// timeout for it; the relay exiting first fails the test.
func (n *notifySocket) wait(t *testing.T, r *relay, prefix string, timeout time.Duration) notification {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if got := n.all(prefix); len(got) > 0 {
			return got[0]
		}
		select {
		case <-r.done:
			t.Fatalf("outbox-cdc exited before notifying %q: %v\n%s", prefix, r.Err(), testkit.Tail(r.LogText(), 20))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %s; notified:\n%s", prefix, timeout, n.dump())
		}
	}
}

func (n *notifySocket) dump() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, g := range n.got {
		b.WriteString(g.at.Format("15:04:05.000") + " " + strings.ReplaceAll(g.state, "\n", " | ") + "\n")
	}
	return b.String()
}

// arrivedAfter returns the notifications of ns that arrived after at.
func arrivedAfter(ns []notification, at time.Time) []notification {
	var out []notification
	for _, n := range ns {
		if n.at.After(at) {
			out = append(out, n)
		}
	}
	return out
}

// TestSystemdNotify runs the relay as a Type=notify unit with
// WatchdogSec=1s would: READY=1 comes once the slot is streamed, not
// before, with the status; WATCHDOG=1 every half second; a second
// instance on the slot is ready too, standing by, and says so; SIGTERM
// sends STOPPING=1 before the drain, and the standby takes over.
func TestSystemdNotify(t *testing.T) {
	const watchdog = time.Second
	ctx := context.Background()
	o := newOutbox(t, "sdnotify", defaultColumns)
	first := listenNotify(t)
	r1 := startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: o.args(), Env: first.env(watchdog), NoWait: true})

	ready := first.wait(t, r1, "READY=1", time.Minute)
	var active bool
	if err := o.db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&active); err != nil || !active {
		t.Errorf("READY=1 sent while the slot was not held (active %v, %v)", active, err)
	}
	if !strings.Contains(r1.LogText(), "msg=streaming") {
		t.Errorf("READY=1 sent before the relay logged it streams:\n%s", testkit.Tail(r1.LogText(), 20))
	}
	if !ready.has("STATUS=streaming: slot " + o.name) {
		t.Errorf("READY=1 came with %q, want the streaming status", ready.state)
	}
	for _, s := range first.all("STATUS=") {
		if s.at.Before(ready.at) && !s.has("STATUS=starting") {
			t.Errorf("before READY=1, status %q; want starting", s.state)
		}
	}

	time.Sleep(3 * time.Second)
	pings := arrivedAfter(first.all("WATCHDOG=1"), ready.at)
	if len(pings) < 4 {
		t.Fatalf("%d pings in 3 s with WATCHDOG_USEC=1s, want one every 500 ms:\n%s", len(pings), first.dump())
	}
	var longest, total time.Duration
	for i := 1; i < len(pings); i++ {
		gap := pings[i].at.Sub(pings[i-1].at)
		longest, total = max(longest, gap), total+gap
	}
	mean := total / time.Duration(len(pings)-1)
	if mean < 400*time.Millisecond || mean > 650*time.Millisecond || longest >= watchdog {
		t.Errorf("pings %s apart on average, at most %s; want about %s, never the whole interval", mean, longest, watchdog/2)
	}

	second := listenNotify(t)
	r2 := startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: o.args(), Env: second.env(watchdog), NoWait: true})
	standby := second.wait(t, r2, "READY=1", time.Minute)
	if !standby.has("STATUS=standing by: slot " + o.name + " is held by another instance") {
		t.Errorf("the second instance's READY=1 came with %q, want standing by", standby.state)
	}
	time.Sleep(2 * time.Second)
	if n := len(arrivedAfter(second.all("WATCHDOG=1"), standby.at)); n < 3 {
		t.Errorf("the standby pinged %d times in 2 s, want one every 500 ms while it polls the slot:\n%s", n, second.dump())
	}

	stopAt := time.Now()
	if code := r1.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
	stopping := arrivedAfter(first.all("STOPPING=1"), stopAt)
	if len(stopping) != 1 || !stopping[0].has("STATUS=draining: ") {
		t.Errorf("after SIGTERM: %v, want one STOPPING=1 with the draining status:\n%s", stopping, first.dump())
	}
	second.wait(t, r2, "STATUS=streaming: slot "+o.name, time.Minute)
}
