package integration

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runOnce runs outbox-cdc to completion and returns its exit code and output.
func runOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("run outbox-cdc: %v", err)
	}
	return 0, string(out)
}

// lastLine is what a user reads first: the one-line error.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

func TestStartupErrors(t *testing.T) {
	o := newOutbox(t, "startup", defaultColumns)
	ctx := context.Background()
	if _, err := o.db.Exec(ctx, `CREATE ROLE norepl LOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = o.db.Exec(ctx, `DROP ROLE norepl`) })
	noReplURL := strings.Replace(pg.URL, "postgres://postgres@", "postgres://norepl@", 1)

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing flag", []string{"--kafka-brokers", broker.Brokers}, 2, "--postgres-url (or OUTBOX_CDC_POSTGRES_URL) is required"},
		{"unknown column", o.args("--column-event-type", "kind"), 2, `has no column "kind"`},
		{"topic template naming a missing column", o.args("--topic", "x.{tenant}"), 2, `has no column "tenant"`},
		{"bad topic template", o.args("--topic", "x.{tenant"), 2, "unclosed {"},
		{"postgres unreachable", []string{"--postgres-url", "postgres://postgres@127.0.0.1:1/postgres", "--kafka-brokers", broker.Brokers, "--http-addr", ""}, 1, "connect to postgres (is it running, and is --postgres-url right?)"},
		{"kafka unreachable", append(o.args(), "--kafka-brokers", "127.0.0.1:1"), 1, "connect to kafka (is it running, and is --kafka-brokers right?"},
		{"role without REPLICATION", append(o.args(), "--postgres-url", noReplURL), 1, `lacks REPLICATION; run ALTER ROLE "norepl" REPLICATION`},
		{"table missing", append(o.args(), "--table", "public.nope"), 1, "table \"public\".\"nope\" does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runOnce(t, tt.args...)
			line := lastLine(out)
			if code != tt.code || !strings.Contains(line, tt.want) || !strings.HasPrefix(line, "outbox-cdc") {
				t.Errorf("exit %d, last line %q; want exit %d and one line containing %q", code, line, tt.code, tt.want)
			}
		})
	}
}
