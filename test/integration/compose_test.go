package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"go.yaml.in/yaml/v3"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// composeService is the part of a docker-compose.yml service this test
// interprets.
type composeService struct {
	Build       any               `yaml:"build"`
	Command     any               `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// composeStack runs docker-compose.yml's services without Docker: the
// test's Postgres and Kafka stand in for the postgres and kafka services,
// outbox-cdc's image is the binary under test, and each service starts only
// when its depends_on conditions hold, as compose starts it.
type composeStack struct {
	services map[string]composeService
	state    map[string]string // started, healthy or completed
	db       string            // the stack's own database
	dbURL    string
	slot     string
}

// blocker names the first depends_on condition of a service that does not
// hold yet; empty when it may start.
func (s *composeStack) blocker(name string) string {
	svc := s.services[name]
	for _, dep := range slices.Sorted(maps.Keys(svc.DependsOn)) {
		cond, state := svc.DependsOn[dep].Condition, s.state[dep]
		ok := false
		switch cond {
		case "service_completed_successfully":
			ok = state == "completed"
		case "service_healthy":
			ok = state == "healthy"
		case "service_started", "":
			ok = state != ""
		}
		if !ok {
			return fmt.Sprintf("%s is %q, %s wants %s", dep, state, name, cond)
		}
	}
	return ""
}

// env is a service's outbox-cdc environment, pointed at the test's servers.
func (s *composeStack) env(name string) []string {
	var env []string
	for k, v := range s.services[name].Environment {
		switch k {
		case "OUTBOX_CDC_POSTGRES_URL":
			v = s.dbURL
		case "OUTBOX_CDC_KAFKA_BROKERS":
			v = broker.Brokers
		case "OUTBOX_CDC_HTTP_ADDR":
			v = "127.0.0.1:0"
		}
		env = append(env, k+"="+v)
	}
	return env
}

// runOneShots runs, in dependency order, every service another one waits
// to complete (condition service_completed_successfully): each must be
// outbox-cdc's image and exit 0.
func (s *composeStack) runOneShots(t *testing.T) {
	t.Helper()
	var pending []string
	for _, name := range slices.Sorted(maps.Keys(s.services)) {
		for dep, d := range s.services[name].DependsOn {
			if d.Condition == "service_completed_successfully" && !slices.Contains(pending, dep) {
				pending = append(pending, dep)
			}
		}
	}
	slices.Sort(pending)
	for len(pending) > 0 {
		i := slices.IndexFunc(pending, func(name string) bool { return s.blocker(name) == "" })
		if i < 0 {
			t.Fatalf("one-shot services %v can never start: %s", pending, s.blocker(pending[0]))
		}
		name := pending[i]
		pending = slices.Delete(pending, i, i+1)
		svc := s.services[name]
		args, ok := svc.Command.([]any)
		if svc.Build == nil || !ok {
			t.Fatalf("one-shot service %s: only outbox-cdc's image with a command list runs here (build %v, command %v)", name, svc.Build, svc.Command)
		}
		var argv []string
		for _, a := range args {
			argv = append(argv, fmt.Sprint(a))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, binary, argv...)
		cmd.Env = append(os.Environ(), s.env(name)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("one-shot service %s (outbox-cdc %s): %v\n%s", name, strings.Join(argv, " "), err, out)
		}
		t.Logf("one-shot service %s (outbox-cdc %s) completed:\n%s", name, strings.Join(argv, " "), out)
		s.state[name] = "completed"
	}
}

// slotExists says whether the relay's slot is in the test's database.
func (s *composeStack) slotExists(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots
		WHERE slot_name = $1 AND database = current_database())`, s.slot).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestComposeStackWithoutDocker runs what docker-compose.yml would run,
// minus Docker: the postgres service's init script in a fresh database,
// the one-shot services, the outbox-cdc service's environment (with the
// addresses of the test servers), and the writer service's own script. The
// writer starts as early as its depends_on allows and the relay as late as
// its own does, the worst order compose may choose: the slot must exist
// when the writer starts, and every row the writer inserts must arrive.
// test/packaging checks the file's structure; this checks that its SQL,
// its shell, its ordering and its configuration work.
func TestComposeStackWithoutDocker(t *testing.T) {
	root, err := testkit.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	s := &composeStack{services: c.Services, slot: "outbox_cdc",
		state: map[string]string{"postgres": "healthy", "kafka": "healthy"}} // the test's servers
	if v, ok := c.Services["outbox-cdc"].Environment["OUTBOX_CDC_SLOT"]; ok {
		s.slot = v
	}
	conn := composeDatabase(t, root, s)
	s.runOneShots(t)

	writer := startComposeWriter(t, s, conn)
	if writer != nil {
		writer.waitRows(t, conn, 2)
	}
	if why := s.blocker("outbox-cdc"); why != "" {
		t.Fatalf("outbox-cdc can never start: %s", why)
	}
	r := startRelayEnv(t, binary, s.env("outbox-cdc"), "--slot", s.slot)
	s.state["outbox-cdc"] = "healthy" // streaming: /readyz answers 200
	if writer == nil {
		if writer = startComposeWriter(t, s, conn); writer == nil {
			t.Fatalf("the writer can never start: %s", s.blocker("writer"))
		}
	}
	writer.waitRows(t, conn, writer.rows(t, conn)+3)
	writer.stop()
	if writer.stderr.Len() > 0 {
		t.Errorf("writer stderr: %s", writer.stderr.String())
	}

	ids := writer.ids(t, conn)
	msgs := readWhenPresent(t, "outbox.event.order", len(ids), time.Minute)
	for _, m := range msgs {
		id, _ := testkit.Header(m, "id")
		delete(ids, id)
		if src, _ := testkit.Header(m, "source"); src != "compose-writer" || !strings.HasPrefix(string(m.Key), "order-") {
			t.Errorf("message key %q, source header %q", m.Key, src)
		}
	}
	if len(ids) > 0 {
		t.Errorf("%d of the %d rows the writer inserted never arrived on outbox.event.order", len(ids), testkit.Distinct(msgs)+len(ids))
	} else {
		t.Logf("compose stack without Docker: all %d rows the writer inserted arrived on outbox.event.order", testkit.Distinct(msgs))
	}
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// composeDatabase creates a fresh database for the stack, runs the postgres
// service's init scripts in it, and returns a connection to it.
func composeDatabase(t *testing.T, root string, s *composeStack) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	s.db = fmt.Sprintf("compose_%d", time.Now().UnixNano()%1e9)
	db := s.db
	admin, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	s.dbURL = strings.Replace(pg.URL, "/postgres?", "/"+db+"?", 1)
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, db)
		_, _ = admin.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
	})
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	for _, v := range s.services["postgres"].Volumes {
		host, target, _ := strings.Cut(v, ":")
		if !strings.HasPrefix(target, "/docker-entrypoint-initdb.d/") {
			continue
		}
		sql, err := os.ReadFile(filepath.Join(root, host))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("postgres init script %s: %v", host, err)
		}
	}
	return conn
}

// composeWriter is the writer service's shell script, running.
type composeWriter struct {
	cmd    *exec.Cmd
	stderr *strings.Builder
	done   chan struct{}
}

// startComposeWriter starts the writer service's script if its depends_on
// conditions hold (nil if not), and checks that the relay's slot exists by
// then: rows committed before it are in no slot's stream.
func startComposeWriter(t *testing.T, s *composeStack, conn *pgx.Conn) *composeWriter {
	t.Helper()
	if s.blocker("writer") != "" {
		return nil
	}
	if !s.slotExists(t, conn) {
		t.Errorf("the writer starts before slot %s exists (depends_on %v): the rows it inserts until then are never relayed",
			s.slot, slices.Sorted(maps.Keys(s.services["writer"].DependsOn)))
	}
	// The writer's own shell script, with compose's $$ unescaped.
	writerCmd, ok := s.services["writer"].Command.([]any)
	if !ok || len(writerCmd) != 1 {
		t.Fatalf("writer command: %v", s.services["writer"].Command)
	}
	script := strings.ReplaceAll(writerCmd[0].(string), "$$", "$")
	w := &composeWriter{cmd: exec.Command("bash", "-c", script), stderr: &strings.Builder{}, done: make(chan struct{})}
	w.cmd.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+portOf(pg.URL), "PGUSER=postgres", "PGDATABASE="+s.db)
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	w.cmd.Stderr = w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(w.stop)
	s.state["writer"] = "started"
	return w
}

// stop kills bash and its psql.
func (w *composeWriter) stop() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.done
}

// rows counts the rows the writer has inserted.
func (w *composeWriter) rows(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE headers->>'source' = 'compose-writer'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ids are the ids of the rows the writer has inserted.
func (w *composeWriter) ids(t *testing.T, conn *pgx.Conn) map[string]bool {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT id::text FROM outbox WHERE headers->>'source' = 'compose-writer'`)
	return idSet(t, rows, err)
}

// waitRows waits until the writer has inserted at least n rows (one a
// second).
func (w *composeWriter) waitRows(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for w.rows(t, conn) < n {
		select {
		case <-w.done:
			t.Fatalf("the writer exited after %d rows: %s", w.rows(t, conn), w.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer inserted %d rows in a minute, want %d", w.rows(t, conn), n)
		}
	}
}

// readWhenPresent reads topic once it holds want messages, or after
// timeout whatever it holds.
func readWhenPresent(t *testing.T, topic string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		ends, total, err := testkit.EndOffsets(context.Background(), client, []string{topic})
		late := time.Now().After(deadline)
		switch {
		case err == nil && (total >= int64(want) || late):
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return testkit.ReadAll(ctx, t, broker.Brokers, ends)
		case late:
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func portOf(url string) string {
	_, rest, _ := strings.Cut(url, "@127.0.0.1:")
	port, _, _ := strings.Cut(rest, "/")
	return port
}
