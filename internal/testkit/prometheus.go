package testkit

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Prometheus is a running Prometheus server (Debian's prometheus package)
// on a loopback port, with a throwaway configuration and data directory.
type Prometheus struct {
	Dir  string
	Addr string // host:port of its HTTP API
	cmd  *exec.Cmd
	done chan struct{}
}

// StartPrometheus writes config (prometheus.yml, which may name rule files
// in the same directory) and the given rule files into a new directory and
// starts Prometheus on it, waiting until it is ready.
func StartPrometheus(config string, files map[string]string) (*Prometheus, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, fmt.Errorf("prometheus not found: apt-get install prometheus")
	}
	dir, err := os.MkdirTemp("", "outbox-cdc-prometheus.")
	if err != nil {
		return nil, err
	}
	files["prometheus.yml"] = config
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	p := &Prometheus{Dir: dir, Addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("prometheus exited at start: %s", b)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = p.Stop()
			return nil, fmt.Errorf("prometheus not ready on %s after 30s", addr)
		}
	}
}

// Log returns what Prometheus logged.
func (p *Prometheus) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "prometheus.log"))
	return string(b)
}

// Stop ends the server by its PID and removes its directory.
func (p *Prometheus) Stop() error {
	signalThenKill(p.cmd.Process, p.done, syscall.SIGTERM, 10*time.Second)
	return os.RemoveAll(p.Dir)
}
