package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// contender is one relay of the side-by-side comparison, started on a
// table of its own and stopped with SIGTERM.
type contender struct {
	name  string
	start func(ctx context.Context, table string) (*exec.Cmd, error)
}

// outboxCDC runs the outbox-cdc binary at its defaults, plus extra flags.
func (b *bench) outboxCDC(extra []string) contender {
	starts := 0
	return contender{name: "outbox-cdc", start: func(_ context.Context, table string) (*exec.Cmd, error) {
		var env []string
		if dir := os.Getenv("OUTBOX_BENCH_PROFILE_DIR"); dir != "" {
			// One CPU profile per start: the steady loads, then the drain.
			starts++
			env = append(env, fmt.Sprintf("OUTBOX_CDC_CPUPROFILE=%s/%s-%d.prof", dir, table, starts))
		}
		var args []string
		bin := ""
		for _, a := range extra {
			if kv, ok := strings.CutPrefix(a, "env:"); ok {
				env = append(env, kv) // env:NAME=VALUE sets the relay's environment
			} else if path, ok := strings.CutPrefix(a, "bin:"); ok {
				bin = path // bin:PATH runs another build of outbox-cdc
			} else if !strings.HasPrefix(a, "name:") {
				args = append(args, a)
			}
		}
		cmd := b.relayCmd(table, table, env)
		cmd.Args = append(cmd.Args, args...)
		if bin != "" {
			cmd.Path, cmd.Args[0] = bin, bin
		}
		return cmd, cmd.Start()
	}}
}

// debezium runs Debezium's PostgreSQL connector with the outbox EventRouter
// on Kafka Connect standalone, set up as the project's issue describes:
// StringConverter keys and values, pgoutput, snapshot.mode=no_data, the
// producer at its defaults, max.batch.size=8192, max.queue.size=32768,
// poll.interval.ms=5, -Xmx1g. Its offsets live in a file per table, so a
// restart resumes where it stopped.
func (b *bench) debezium(libs string) contender {
	return contender{name: "debezium", start: func(_ context.Context, table string) (*exec.Cmd, error) {
		connector, err := b.debeziumConnector(table)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(b.tmp, "debezium-"+table)
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		worker := []string{
			"bootstrap.servers=" + b.brokers,
			"key.converter=org.apache.kafka.connect.storage.StringConverter",
			"value.converter=org.apache.kafka.connect.storage.StringConverter",
			"offset.storage.file.filename=" + filepath.Join(dir, "offsets.dat"),
			"listeners=http://127.0.0.1:" + strconv.Itoa(port),
			"plugin.path=",
		}
		files := map[string][]string{"worker.properties": worker, "connector.properties": connector}
		return startConnect(libs, dir, files, "org.apache.kafka.connect.cli.ConnectStandalone", "worker.properties", "connector.properties")
	}}
}

// debeziumConnector is the connector configuration of both Debezium
// contenders, as key=value lines: table's slot and publication, its events
// routed to table.{aggregate_type}.
func (b *bench) debeziumConnector(table string) ([]string, error) {
	pc, err := pgconn.ParseConfig(b.pgURL)
	if err != nil {
		return nil, fmt.Errorf("parse the Postgres URL: %w", err)
	}
	return []string{
		"name=" + table,
		"connector.class=io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max=1",
		"plugin.name=pgoutput",
		"database.hostname=" + pc.Host,
		"database.port=" + strconv.Itoa(int(pc.Port)),
		"database.user=" + pc.User,
		"database.password=" + pc.Password,
		"database.dbname=" + pc.Database,
		"topic.prefix=" + table,
		"slot.name=" + table,
		"publication.name=" + table,
		"publication.autocreate.mode=filtered",
		"table.include.list=public." + table,
		"snapshot.mode=no_data",
		"max.batch.size=8192",
		"max.queue.size=32768",
		"poll.interval.ms=5",
		"transforms=outbox",
		"transforms.outbox.type=io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.field.event.key=aggregate_id",
		"transforms.outbox.route.by.field=aggregate_type",
		"transforms.outbox.route.topic.replacement=" + table + ".${routedByValue}",
	}, nil
}

// startConnect writes files (key=value lines) and a log4j configuration
// (warnings and errors to connect.log) to dir, and starts Kafka Connect's
// mainClass with args, names of files in dir.
func startConnect(libs, dir string, files map[string][]string, mainClass string, args ...string) (*exec.Cmd, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files["log4j.properties"] = []string{"log4j.rootLogger=WARN, stderr", "log4j.appender.stderr=org.apache.log4j.ConsoleAppender",
		"log4j.appender.stderr.Target=System.err", "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout",
		"log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n"}
	for name, lines := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	cmdArgs := []string{"-Xmx1g", "-Dlog4j.configuration=file:" + filepath.Join(dir, "log4j.properties"), "-cp", filepath.Join(libs, "*"), mainClass}
	for _, a := range args {
		cmdArgs = append(cmdArgs, filepath.Join(dir, a))
	}
	cmd := exec.Command("java", cmdArgs...)
	logf, err := os.OpenFile(filepath.Join(dir, "connect.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

// fetchDebezium resolves Debezium's jars through scripts/debezium.sh and
// returns their directory.
func fetchDebezium(root string) (string, error) {
	out, err := exec.Command(filepath.Join(root, "scripts", "debezium.sh"), "fetch").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("scripts/debezium.sh fetch: %s", strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if dir, ok := strings.CutPrefix(line, "libs="); ok {
			return dir, nil
		}
	}
	return "", errors.New("scripts/debezium.sh fetch printed no libs= line")
}

// stopGently ends a relay with SIGTERM, waiting up to a minute before
// SIGKILL.
func stopGently(cmd *exec.Cmd) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 143 { // the JVM's answer to SIGTERM
			return nil
		}
		return err
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("did not stop within a minute of SIGTERM")
	}
}

// procCPU returns the CPU seconds (user and system) process pid has used,
// from /proc/PID/stat; 0 when it cannot be read.
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// procWakes returns pid's read and write system calls (/proc/PID/io) and
// its threads' context switches, voluntary and not (/proc/PID/task/*/status):
// how often the process woke up and went to the kernel, which on a
// shared 2-core machine costs more than the work between.
func procWakes(pid int) (syscalls, switches float64) {
	if pid <= 0 {
		return 0, 0
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				syscalls += n
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				switches += n
			}
		}
	}
	return syscalls, switches
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
