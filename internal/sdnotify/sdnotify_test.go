package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listen binds a unixgram socket at name (a path, or @ and an abstract
// name) as systemd does for NOTIFY_SOCKET, closed when the test ends.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("bind %s: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// receive reads one datagram, failing the test after a second.
func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 4096)
	n, err := conn.Read(b)
	if err != nil {
		t.Fatalf("no datagram: %v", err)
	}
	return string(b[:n])
}

func TestNotifySendsOneDatagramPerMessage(t *testing.T) {
	sockets := map[string]string{
		"path":     filepath.Join(t.TempDir(), "notify"),
		"abstract": fmt.Sprintf("@outbox-cdc-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	messages := []string{"READY=1", "READY=1\nSTATUS=streaming slot s at LSN 0/16B3748", "WATCHDOG=1", "STOPPING=1\nSTATUS=draining"}
	for kind, socket := range sockets {
		t.Run(kind, func(t *testing.T) {
			conn := listen(t, socket)
			n, err := New(socket)
			if err != nil {
				t.Fatal(err)
			}
			if !n.Enabled() {
				t.Fatal("a Notifier with a socket says it is not enabled")
			}
			for _, m := range messages {
				if err := n.Notify(m); err != nil {
					t.Fatalf("notify %q: %v", m, err)
				}
			}
			for _, want := range messages {
				if got := receive(t, conn); got != want {
					t.Errorf("received %q, want %q", got, want)
				}
			}
		})
	}
}

func TestNotifyWithoutSocketSendsNothing(t *testing.T) {
	for name, n := range map[string]*Notifier{"empty NOTIFY_SOCKET": mustNew(t, ""), "nil": nil, "zero": {}} {
		if n.Enabled() {
			t.Errorf("%s: enabled without a socket", name)
		}
		if err := n.Notify("READY=1"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustNew(t *testing.T, socket string) *Notifier {
	t.Helper()
	n, err := New(socket)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNewRefusesWhatIsNotASocketAddress(t *testing.T) {
	for _, socket := range []string{"vsock:2:1234", "run/notify", "@"} {
		if _, err := New(socket); err == nil {
			t.Errorf("New(%q) accepted it", socket)
		}
	}
}

func TestNotifyToAbsentSocketFails(t *testing.T) {
	n := mustNew(t, filepath.Join(t.TempDir(), "gone"))
	err := n.Notify("READY=1")
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("notify to a socket nobody bound: %v, want an error naming it", err)
	}
}

func TestWatchdog(t *testing.T) {
	const self = 4242
	tests := []struct {
		name, usec, wpid string
		want             time.Duration
		err              bool
	}{
		{"unset", "", "", 0, false},
		{"for any process", "30000000", "", 30 * time.Second, false},
		{"for this process", "1000000", "4242", time.Second, false},
		{"for another process", "1000000", "4243", 0, false},
		{"pid only", "", "4242", 0, false},
		{"zero", "0", "", 0, true},
		{"not a number", "30s", "", 0, true},
		{"negative", "-1", "", 0, true},
		{"too large", "18446744073709551615", "", 0, true},
		{"pid not a number", "1000000", "self", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Watchdog(tt.usec, tt.wpid, self)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("Watchdog(%q, %q) = %s, %v; want %s, error %v", tt.usec, tt.wpid, got, err, tt.want, tt.err)
			}
		})
	}
}

// TestNotifyCarriesSenderPID: systemd with NotifyAccess=main accepts a
// message only from the main PID, which it reads from the credentials the
// kernel attaches to a datagram once the receiver set SO_PASSCRED.
func TestNotifyCarriesSenderPID(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "notify")
	conn := listen(t, socket)
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_PASSCRED: %v %v", err, serr)
	}
	if err := mustNew(t, socket).Notify("WATCHDOG=1"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	b, oob := make([]byte, 64), make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
	n, oobn, _, _, err := conn.ReadMsgUnix(b, oob)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v: %v", msgs, err)
	}
	cred, err := syscall.ParseUnixCredentials(&msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:n]) != "WATCHDOG=1" || int(cred.Pid) != os.Getpid() {
		t.Errorf("received %q from pid %d, want WATCHDOG=1 from %d", b[:n], cred.Pid, os.Getpid())
	}
}

// TestNotifyDoesNotBlockOnAManagerThatStopsReading: a service manager that
// stops reading its socket fills the socket's queue; a notification then
// gives up after a bound instead of blocking the watch, and with it the
// relay's exit after its drain.
func TestNotifyDoesNotBlockOnAManagerThatStopsReading(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	listen(t, name) // bound, never read
	n, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 5000 && err == nil; i++ {
			err = n.Notify("STATUS=" + strings.Repeat("x", 1000))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("5000 notifications to a socket never read all went through: the test did not fill its queue")
		}
		t.Logf("the socket filled; the notification gave up with %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a notification to a socket never read still blocks after 10 s")
	}
}
