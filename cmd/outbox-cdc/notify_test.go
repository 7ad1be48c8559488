package main

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNotifyOptions: without NOTIFY_SOCKET the relay tells nobody; with
// one it does; a variable that cannot be read is a warning, not a failure.
func TestNotifyOptions(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	tests := []struct {
		name    string
		environ []string
		options int
		warning string
	}{
		{"no socket", []string{"WATCHDOG_USEC=30000000"}, 0, ""},
		{"a socket", []string{"NOTIFY_SOCKET=" + sock}, 1, ""},
		{"a socket and a watchdog", []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=30000000"}, 1, ""},
		{"the last one wins", []string{"NOTIFY_SOCKET=" + sock, "NOTIFY_SOCKET="}, 0, ""},
		{"an unsupported socket", []string{"NOTIFY_SOCKET=vsock:2:1"}, 0, "not telling systemd"},
		{"an unreadable watchdog", []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=30s"}, 1, "no watchdog pings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			got := notifyOptions(tt.environ, slog.New(slog.NewTextHandler(&logs, nil)))
			if len(got) != tt.options {
				t.Errorf("%d options, want %d", len(got), tt.options)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned != (tt.warning != "") || !strings.Contains(logs.String(), tt.warning) {
				t.Errorf("logged %q, want a warning %q", logs.String(), tt.warning)
			}
		})
	}
}

// TestNotReadyWhenKafkaIsUnreachable: a relay that cannot reach Kafka at
// start exits without ever telling systemd it is ready (a Type=notify
// unit then fails to start, rather than counting as running).
func TestNotReadyWhenKafkaIsUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"run", "--postgres-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1", "--http-addr", ""},
		[]string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=1000000"}, &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d: %s", code, exitFailure, stderr.String())
	}
	var told []string
	b := make([]byte, 4096)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := conn.Read(b)
		if err != nil {
			break
		}
		told = append(told, string(b[:n]))
	}
	if len(told) == 0 || !strings.Contains(strings.Join(told, "\n"), "STATUS=starting") {
		t.Errorf("told %q, want the starting status", told)
	}
	if strings.Contains(strings.Join(told, "\n"), "READY=1") {
		t.Errorf("told %q: ready, though Kafka was unreachable", told)
	}
}
