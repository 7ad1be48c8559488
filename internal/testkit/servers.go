package testkit

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Root returns the repository root: the nearest directory above the working
// directory that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// script runs scripts/NAME with args and returns its key=value output lines.
func script(env []string, name string, args ...string) (map[string]string, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	kv := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	return kv, nil
}

// BuildRelay builds cmd/outbox-cdc into out, with the race detector when
// race is set: the tests run the binary users run, flags, signals and exit
// codes included. The compiler's output goes to stderr.
func BuildRelay(out string, race bool) error {
	root, err := Root()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/outbox-cdc")...)
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build outbox-cdc: %w", err)
	}
	return nil
}

// Servers are the Postgres and the single Kafka broker a test package
// starts once, in TestMain.
type Servers struct {
	Postgres *Postgres
	Kafka    *Kafka
}

// StartServers starts a Postgres and a Kafka broker. stop stops both; they
// are also stopped 20 s before go test's -timeout (StopBeforeTimeout). An
// error says which server did not start and what it needs.
func StartServers() (s *Servers, stop func(), err error) {
	pg, err := StartPostgres()
	if err != nil {
		return nil, nil, fmt.Errorf("start postgres: %w", err)
	}
	k, err := StartKafka()
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("start kafka (needs java and mvn; see scripts/kafka.sh): %w", err), pg.Stop())
	}
	cancel := StopBeforeTimeout(k.Stop, pg.Stop)
	stop = func() {
		cancel()
		_ = k.Stop()
		_ = pg.Stop()
	}
	return &Servers{Postgres: pg, Kafka: k}, stop, nil
}

// StopBeforeTimeout runs stops 20 s before go test's -timeout would end the
// process, which runs no deferred function: servers started by TestMain are
// stopped all the same. The returned func cancels it.
func StopBeforeTimeout(stops ...func() error) (cancel func()) {
	d := testTimeout()
	if d == 0 {
		return func() {}
	}
	t := time.AfterFunc(d-20*time.Second, func() {
		fmt.Fprintln(os.Stderr, "near the test timeout; stopping servers")
		for _, stop := range stops {
			_ = stop()
		}
	})
	return func() { t.Stop() }
}

func testTimeout() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 30*time.Second {
			return d
		}
	}
	return 0
}

// Main is a TestMain for a package whose tests need servers: in -short
// mode it runs none of them and says so (go test -short runs the fast unit
// tests only); otherwise run starts the servers, runs m and returns its
// exit code.
func Main(m *testing.M, pkg, needs string, run func(*testing.M) int) {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("%s: skipped in -short mode (%s)\n", pkg, needs)
		os.Exit(0)
	}
	os.Exit(run(m))
}
