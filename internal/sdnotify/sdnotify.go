// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)): newline-separated KEY=VALUE assignments (READY=1,
// STATUS=…, STOPPING=1, WATCHDOG=1), each message one datagram to the
// unix socket that $NOTIFY_SOCKET names. A process that systemd did not
// start with Type=notify has no such socket, and a Notifier made from an
// empty address sends nothing: the cost of a call is one nil check.
// Watch is the loop that keeps the service manager told: readiness once,
// the status as it changes, and watchdog pings only while the loops that
// must make progress do.
//
// It is the few lines of the datagram protocol rather than a dependency:
// github.com/coreos/go-systemd/v22/daemon does the same (a datagram to
// the socket, dialled per message) and brings nothing more that is used.
// The environment is left as it is (sd_notify's unset_environment=false):
// outbox-cdc starts no child that could inherit it.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Notifier sends state to the service manager. The zero value, and a nil
// *Notifier, send nothing. Its methods may be called from any goroutine.
type Notifier struct {
	addr *net.UnixAddr // nil: no socket, nothing is sent
}

// New returns a Notifier for the socket named by socket, the value of
// $NOTIFY_SOCKET: an absolute path, or '@' and the name of a socket in the
// abstract namespace. An empty socket gives a Notifier that sends nothing.
// Other forms (systemd's vsock: addresses, a relative path) are an error.
func New(socket string) (*Notifier, error) {
	switch {
	case socket == "":
		return &Notifier{}, nil
	case strings.HasPrefix(socket, "/"), strings.HasPrefix(socket, "@") && len(socket) > 1:
		// Go's net package maps a leading '@' to the abstract namespace.
		return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}, nil
	}
	return nil, fmt.Errorf("NOTIFY_SOCKET %q: not an absolute path nor an abstract socket (@name); unsupported", socket)
}

// Enabled reports whether there is a socket to send to.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// writeTimeout bounds one notification's write.
const writeTimeout = time.Second

// Notify sends state, one or more KEY=VALUE assignments separated by
// newlines, in one datagram. Without a socket it does nothing. The socket
// is dialled for each message, as sd_notify does: one that systemd bound
// again (daemon-reexec) is found by the next message.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notify %s: %w", n.addr.Name, err)
	}
	defer conn.Close()
	// A manager that stops reading fills the socket's queue: the write
	// gives up rather than block the watch, and the relay's exit with it.
	if err := conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return fmt.Errorf("notify %s: %w", n.addr.Name, err)
	}
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify %s: %w", n.addr.Name, err)
	}
	return nil
}

// Watchdog returns the interval within which the service manager expects
// WATCHDOG=1 from process pid, from the values of $WATCHDOG_USEC (usec)
// and $WATCHDOG_PID (wpid), as sd_watchdog_enabled(3) reads them: zero
// when usec is empty, or when wpid is set and names another process (the
// variables were inherited from a parent that systemd watches). It is
// recommended to send WATCHDOG=1 every half of it.
func Watchdog(usec, wpid string, pid int) (time.Duration, error) {
	if usec == "" {
		return 0, nil
	}
	if wpid != "" {
		p, err := strconv.Atoi(wpid)
		if err != nil || p <= 0 {
			return 0, fmt.Errorf("WATCHDOG_PID %q: not a process id", wpid)
		}
		if p != pid {
			return 0, nil
		}
	}
	us, err := strconv.ParseUint(usec, 10, 64)
	if err != nil || us == 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC %q: not a positive number of microseconds", usec)
	}
	if us > uint64(1<<63-1)/uint64(time.Microsecond) {
		return 0, errors.New("WATCHDOG_USEC " + usec + ": too large")
	}
	return time.Duration(us) * time.Microsecond, nil
}
