package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

// TestComposeStackWithoutDocker runs what docker-compose.yml would run,
// minus Docker: the postgres service's init script in a fresh database, the
// outbox-cdc service's environment (with the addresses of the test servers),
// and the writer service's own script. The writer's events must arrive.
// test/packaging checks the file's structure; this checks that its SQL, its
// shell and its configuration work.
func TestComposeStackWithoutDocker(t *testing.T) {
	root, err := harness.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Command     any               `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	db := fmt.Sprintf("compose_%d", time.Now().UnixNano()%1e9)
	admin, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	dbURL := strings.Replace(pg.URL, "/postgres?", "/"+db+"?", 1)
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, db)
		_, _ = admin.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
	})
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, v := range c.Services["postgres"].Volumes {
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

	// The relay, configured as the compose file says, but for the servers
	// of this test.
	var env []string
	slot := "outbox_cdc"
	for k, v := range c.Services["outbox-cdc"].Environment {
		switch k {
		case "OUTBOX_CDC_POSTGRES_URL":
			v = dbURL
		case "OUTBOX_CDC_KAFKA_BROKERS":
			v = broker.Brokers
		case "OUTBOX_CDC_HTTP_ADDR":
			v = "127.0.0.1:0"
		case "OUTBOX_CDC_SLOT":
			slot = v
			continue
		}
		env = append(env, k+"="+v)
	}
	r := startRelayEnv(t, binary, env, "--slot", slot)

	// The writer's own shell script, with compose's $$ unescaped.
	writerCmd, ok := c.Services["writer"].Command.([]any)
	if !ok || len(writerCmd) != 1 {
		t.Fatalf("writer command: %v", c.Services["writer"].Command)
	}
	script := strings.ReplaceAll(writerCmd[0].(string), "$$", "$")
	w := exec.Command("bash", "-c", script)
	w.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+portOf(pg.URL), "PGUSER=postgres", "PGDATABASE="+db)
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var werr strings.Builder
	w.Stderr = &werr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopWriter := func() {
		_ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL) // bash and its psql
		_ = w.Wait()
	}
	t.Cleanup(stopWriter)
	time.Sleep(3500 * time.Millisecond)
	stopWriter()
	if werr.Len() > 0 {
		t.Errorf("writer stderr: %s", werr.String())
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE headers->>'source' = 'compose-writer'`).Scan(&n); err != nil || n < 2 {
		t.Fatalf("the writer inserted %d rows (%v)", n, err)
	}
	msgs := consume(t, []string{"outbox.event.order"}, n, time.Minute)
	for _, m := range msgs {
		if src, _ := header(m, "source"); src != "compose-writer" || !strings.HasPrefix(string(m.Key), "order-") {
			t.Errorf("message key %q, source header %q", m.Key, src)
		}
	}
	t.Logf("compose stack without Docker: the writer inserted %d rows; %d arrived on outbox.event.order", n, countIDs(msgs))
	if code := r.stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

func portOf(url string) string {
	_, rest, _ := strings.Cut(url, "@127.0.0.1:")
	port, _, _ := strings.Cut(rest, "/")
	return port
}
