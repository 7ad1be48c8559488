package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultColumns is the outbox table of sql/publication.sql.
const defaultColumns = `
	id uuid primary key,
	aggregate_type text not null,
	aggregate_id text not null,
	event_type text not null,
	payload jsonb not null,
	headers jsonb,
	created_at timestamptz not null default now()`

// outbox is one test's own table, publication, slot and topic prefix.
type outbox struct {
	name string // table, publication, slot and topic prefix
	db   *pgxpool.Pool
}

func newOutbox(t *testing.T, prefix, columns string) *outbox {
	t.Helper()
	// Unique per run: topics outlive a test, and -count=N reruns it.
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1e9)
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	if _, err := db.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", name, columns)); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	o := &outbox{name: name, db: db}
	t.Cleanup(func() {
		if t.Failed() {
			var state string
			_ = db.QueryRow(ctx, fmt.Sprintf(`SELECT format('slot confirmed %%s, active %%s, wal now %%s, %%s rows in %s',
				confirmed_flush_lsn, active, pg_current_wal_lsn(), (SELECT count(*) FROM %s)) FROM pg_replication_slots WHERE slot_name = $1`, name, name), name).Scan(&state)
			t.Logf("at failure: %s", state)
		}
		// The relay is stopped by its own cleanup (registered later, so run
		// earlier); an inactive slot pins WAL, so drop it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Errorf("drop slot %s: %v", name, err)
				}
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_, _ = db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
		_, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
		db.Close()
	})
	return o
}

// args are the relay flags for this outbox; extra ones follow.
func (o *outbox) args(extra ...string) []string {
	return append([]string{
		"--postgres-url", pg.URL,
		"--kafka-brokers", broker.Brokers,
		"--table", "public." + o.name,
		"--publication", o.name,
		"--slot", o.name,
		"--topic", o.name + ".{aggregate_type}",
		"--status-interval", "1s",
		"--http-addr", "127.0.0.1:0", // several relays run at once; see relay.httpAddr
	}, extra...)
}

// confirmed returns the slot's confirmed_flush_lsn.
func (o *outbox) confirmed(t *testing.T) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := o.db.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&s); err != nil {
		t.Fatalf("read slot %s: %v", o.name, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatalf("parse lsn %q: %v", s, err)
	}
	return lsn
}

// currentLSN returns pg_current_wal_insert_lsn(): taken right after a
// commit, the end of that commit record (unless something else wrote WAL
// meanwhile, which only makes it later).
func (o *outbox) currentLSN(t *testing.T) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := o.db.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		t.Fatalf("read wal lsn: %v", err)
	}
	lsn, _ := pglogrepl.ParseLSN(s)
	return lsn
}

// row is an outbox row as the tests write it.
type row struct {
	ID, AggregateType, AggregateID, EventType, Payload string
	Headers                                            *string
}

// insertTx inserts rows in one transaction, committed or rolled back.
func (o *outbox) insertTx(ctx context.Context, rows []row, commit bool) error {
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	batch := &pgx.Batch{}
	for _, r := range rows {
		batch.Queue(fmt.Sprintf("INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4, $5, $6)", o.name),
			r.ID, r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// relay is a running outbox-cdc process.
type relay struct {
	cmd     *exec.Cmd
	log     string
	done    chan struct{}
	err     error
	started time.Time
}

func startRelay(t *testing.T, args ...string) *relay {
	t.Helper()
	return startRelayBinary(t, binary, args...)
}

// startRelayBinary is startRelay with another build of outbox-cdc.
func startRelayBinary(t *testing.T, binary string, args ...string) *relay {
	t.Helper()
	return startRelayEnv(t, binary, nil, args...)
}

// startRelayEnv is startRelayBinary with extra environment variables.
func startRelayEnv(t *testing.T, binary string, env []string, args ...string) *relay {
	t.Helper()
	return startRelayProcess(t, binary, env, false, args...)
}

// startRelayNoWait starts the relay without waiting for its slot to stream
// (a backfill runs first).
func startRelayNoWait(t *testing.T, args ...string) *relay {
	t.Helper()
	return startRelayProcess(t, binary, nil, true, args...)
}

func startRelayProcess(t *testing.T, binary string, env []string, noWait bool, args ...string) *relay {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "outbox-cdc.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// If the test process itself is killed, no cleanup runs: the kernel
	// stops the relay with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start outbox-cdc: %v", err)
	}
	r := &relay{cmd: cmd, log: logPath, done: make(chan struct{}), started: time.Now()}
	go func() {
		r.err = cmd.Wait()
		f.Close()
		close(r.done)
	}()
	if !noWait {
		waitStreaming(t, r, args)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// A failed test leaves a goroutine dump in the log.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-r.done:
			case <-time.After(5 * time.Second):
			}
		}
		_ = cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("outbox-cdc log (pid %d, kept at %s):\n%s", cmd.Process.Pid, logPath, tail(string(b), 40))
			_ = os.WriteFile(filepath.Join(os.TempDir(), "outbox-cdc-failed-"+t.Name()+".log"), b, 0o644)
		}
	})
	return r
}

// waitStreaming waits until the relay's slot is active: rows committed
// before the slot exists are not in its stream.
func waitStreaming(t *testing.T, r *relay, args []string) {
	t.Helper()
	slot := "outbox_cdc"
	for i, a := range args {
		if a == "--slot" && i+1 < len(args) {
			slot = args[i+1]
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var active bool
		err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
		if err == nil && active {
			return
		}
		select {
		case <-r.done:
			b, _ := os.ReadFile(r.log)
			t.Fatalf("outbox-cdc exited before streaming: %v\n%s", r.err, tail(string(b), 20))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not active 60s after outbox-cdc started", slot)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop sends sig and waits for the exit code, failing after timeout.
func (r *relay) stop(t *testing.T, sig syscall.Signal, timeout time.Duration) int {
	t.Helper()
	_ = r.cmd.Process.Signal(sig)
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
