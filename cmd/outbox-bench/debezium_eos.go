package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// connectStartTimeout bounds a Connect worker's start, to its task
// running: a distributed worker takes ~25 s here, more after a kill -9
// (its old member's session must expire first).
const connectStartTimeout = 3 * time.Minute

// debeziumEOS runs the same connector as debezium exactly once, as
// Debezium's documentation prescribes (KIP-618): Kafka Connect in
// distributed mode with exactly.once.source.support=enabled, and the
// connector, submitted over REST, with exactly.once.support=required (the
// worker refuses it unless the connector can) and transaction.boundary=poll,
// so that each poll's records and their source offsets are committed in one
// Kafka transaction. The worker's group and internal topics are named after
// the table: a restart on the same table resumes from its offsets, and
// rounds do not collide.
func (b *bench) debeziumEOS(libs string) contender {
	submitted := map[string]bool{} // tables whose connector the config topic holds
	return contender{name: "debezium-eos", start: func(ctx context.Context, table string) (*exec.Cmd, error) {
		connector, err := b.debeziumConnector(table)
		if err != nil {
			return nil, err
		}
		connector = append(connector, "exactly.once.support=required", "transaction.boundary=poll")
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(b.tmp, "debezium-eos-"+table)
		worker := []string{
			"bootstrap.servers=" + b.brokers,
			"group.id=" + table,
			"key.converter=org.apache.kafka.connect.storage.StringConverter",
			"value.converter=org.apache.kafka.connect.storage.StringConverter",
			"config.storage.topic=" + table + ".connect-configs",
			"offset.storage.topic=" + table + ".connect-offsets",
			"status.storage.topic=" + table + ".connect-status",
			"config.storage.replication.factor=1",
			"offset.storage.replication.factor=1",
			"status.storage.replication.factor=1",
			"exactly.once.source.support=enabled",
			"listeners=http://127.0.0.1:" + strconv.Itoa(port),
			// One worker: nobody else can take a lost task, so waiting for
			// its owner to come back (5 minutes by default) only delays it.
			"scheduled.rebalance.max.delay.ms=0",
			"plugin.path=",
		}
		files := map[string][]string{"worker.properties": worker}
		cmd, err := startConnect(libs, dir, files, "org.apache.kafka.connect.cli.ConnectDistributed", "worker.properties")
		if err != nil {
			return nil, fmt.Errorf("start Kafka Connect (distributed): %w", err)
		}
		rest := "http://127.0.0.1:" + strconv.Itoa(port)
		deadline := time.Now().Add(connectStartTimeout)
		if !submitted[table] {
			err = submitConnector(ctx, rest, connector, cmd, deadline)
			submitted[table] = err == nil
		}
		if err == nil {
			err = waitTaskRunning(ctx, rest, table, strconv.Itoa(port), cmd, deadline)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("%w; the worker's log ends:\n%s", err, tail(filepath.Join(dir, "connect.log"), 20))
		}
		return cmd, nil
	}}
}

// submitConnector POSTs the connector (key=value lines) to the worker's
// /connectors, retrying while the worker is not up, has not registered its
// resources (404) or has not joined its group (409); a 400 (a refused
// configuration) is final.
func submitConnector(ctx context.Context, rest string, connector []string, cmd *exec.Cmd, deadline time.Time) error {
	config := map[string]string{}
	for _, kv := range connector {
		k, v, _ := strings.Cut(kv, "=")
		config[k] = v
	}
	body, err := json.Marshal(map[string]any{"name": config["name"], "config": config})
	if err != nil {
		return err
	}
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rest+"/connectors", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		code, answer, err := do(req)
		switch {
		case err == nil && code == http.StatusCreated:
			return nil
		case err == nil && code == http.StatusBadRequest:
			return fmt.Errorf("POST /connectors: %d %s", code, answer)
		case err == nil:
			last = fmt.Sprintf("%d %s", code, answer)
		default:
			last = err.Error()
		}
		if err := waitOrGiveUp(ctx, cmd, deadline); err != nil {
			return fmt.Errorf("POST /connectors (last: %s): %w", last, err)
		}
	}
}

// connectorStatus is GET /connectors/NAME/status.
type connectorStatus struct {
	Connector taskStatus   `json:"connector"`
	Tasks     []taskStatus `json:"tasks"`
}

type taskStatus struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace"`
}

// waitTaskRunning waits until the connector's task runs on this worker
// (the status topic may still say RUNNING for a worker killed before).
func waitTaskRunning(ctx context.Context, rest, name, port string, cmd *exec.Cmd, deadline time.Time) error {
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rest+"/connectors/"+name+"/status", nil)
		if err != nil {
			return err
		}
		code, answer, err := do(req)
		var st connectorStatus
		switch {
		case err != nil:
			last = err.Error()
		case code != http.StatusOK || json.Unmarshal([]byte(answer), &st) != nil:
			last = fmt.Sprintf("%d %s", code, answer)
		default:
			last = answer
			for _, t := range append(st.Tasks, st.Connector) {
				if t.State == "FAILED" && strings.HasSuffix(t.WorkerID, ":"+port) {
					trace, _, _ := strings.Cut(t.Trace, "\n")
					return fmt.Errorf("connector %s failed: %s", name, trace)
				}
			}
			if len(st.Tasks) > 0 && st.Tasks[0].State == "RUNNING" && strings.HasSuffix(st.Tasks[0].WorkerID, ":"+port) {
				return nil
			}
		}
		if err := waitOrGiveUp(ctx, cmd, deadline); err != nil {
			return fmt.Errorf("connector %s's task not running (last status: %s): %w", name, last, err)
		}
	}
}

// restClient talks to Kafka Connect's REST API; a worker that hangs
// must not hang the bench.
var restClient = &http.Client{Timeout: 30 * time.Second}

// do sends req and returns the status code and the body, trimmed.
func do(req *http.Request) (int, string, error) {
	resp, err := restClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// waitOrGiveUp sleeps before the next try, and says why not to try again:
// the worker exited, the deadline passed, or ctx ended.
func waitOrGiveUp(ctx context.Context, cmd *exec.Cmd, deadline time.Time) error {
	if exited(cmd) {
		return errors.New("the worker exited")
	}
	if time.Now().After(deadline) {
		return fmt.Errorf("gave up after %s", connectStartTimeout)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}

// tail returns the last n lines of the file at path (the scratch
// directory holding it is removed when the bench exits).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
