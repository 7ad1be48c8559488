//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/harness"
)

// outbox is one test's table, publication, slot and topic prefix.
type outbox struct {
	name string
	db   *pgxpool.Pool
}

func newOutbox(t *testing.T, prefix string) *outbox {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1e9)
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL,
		aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`, name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_, _ = db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
		_, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
		db.Close()
	})
	return &outbox{name: name, db: db}
}

// args are the relay's flags: production topic settings, the proxies.
func (o *outbox) args(extra ...string) []string {
	return append([]string{
		"--postgres-url", pg.URL, "--kafka-brokers", brokers,
		"--table", "public." + o.name, "--publication", o.name, "--slot", o.name,
		"--topic", o.name + ".{aggregate_type}", "--dlq-topic", o.name + ".dlq",
		"--topic-partitions", "3", "--topic-replication-factor", "3", "--topic-config", "min.insync.replicas=2",
		"--status-interval", "1s", "--http-addr", "127.0.0.1:0", "--kafka-metadata-max-age", "5s",
	}, extra...)
}

func (o *outbox) lsn(t *testing.T, query string) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := o.db.QueryRow(context.Background(), query, o.name).Scan(&s); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	l, _ := pglogrepl.ParseLSN(s)
	return l
}

// confirmed is the slot's confirmed_flush_lsn; current the WAL's insert
// position (after a commit: at or past its end).
func (o *outbox) confirmed(t *testing.T) pglogrepl.LSN {
	return o.lsn(t, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`)
}

func (o *outbox) current(t *testing.T) pglogrepl.LSN {
	return o.lsn(t, `SELECT pg_current_wal_insert_lsn()::text WHERE $1::text IS NOT NULL`)
}

// relay is a running outbox-cdc.
type relay struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startRelay(t *testing.T, o *outbox, args ...string) *relay {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "outbox-cdc.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &relay{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(r.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("outbox-cdc log:\n%s", tail(string(b), 40))
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		var active bool
		_ = o.db.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, o.name).Scan(&active)
		if active {
			return r
		}
		select {
		case <-r.done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("outbox-cdc exited before streaming:\n%s", tail(string(b), 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("slot not streamed a minute after outbox-cdc started")
		}
	}
}

var addrRE = regexp.MustCompile(`serving metrics and probes"? addr=(\S+)`)

// readyz answers the relay's /readyz: its status and body.
func (r *relay) readyz(t *testing.T) (int, string) {
	return r.get(t, "/readyz")
}

// get asks the relay's HTTP server for path.
func (r *relay) get(t *testing.T, path string) (int, string) {
	t.Helper()
	b, _ := os.ReadFile(r.log)
	m := addrRE.FindSubmatch(b)
	if m == nil {
		t.Fatal("no metrics address in the log")
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + string(m[1]) + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// load writes rows of keys aggregates, one per transaction, each carrying
// its key's counter n, until stopped.
type load struct {
	o       *outbox
	stop    chan struct{}
	stopped chan struct{}

	mu        sync.Mutex
	committed map[string]int // "key/n" → 1
	counters  map[string]int
	last      time.Time // commit time of the newest row
}

func startLoad(o *outbox, keys int, pause time.Duration) *load {
	l := &load{o: o, stop: make(chan struct{}), stopped: make(chan struct{}), committed: map[string]int{}, counters: map[string]int{}}
	go func() { // owned by the test: ends at finish
		defer close(l.stopped)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-time.After(pause):
			}
			key := fmt.Sprintf("k%d", i%keys)
			l.mu.Lock()
			n := l.counters[key]
			l.mu.Unlock()
			_, err := o.db.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'e', $2)`, o.name),
				key, fmt.Sprintf(`{"n": %d}`, n))
			if err != nil {
				continue // Postgres is not faulted here; a failed insert is simply not counted
			}
			l.mu.Lock()
			l.counters[key] = n + 1
			l.committed[fmt.Sprintf("%s/%d", key, n)] = 1
			l.last = time.Now()
			l.mu.Unlock()
		}
	}()
	return l
}

// finish stops the writers and returns how many rows they committed.
func (l *load) finish() int {
	close(l.stop)
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.committed)
}

// consume reads topic's partitions until want distinct events are there.
func consume(t *testing.T, topic string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	for {
		ends, total, err := harness.EndOffsets(ctx, client, []string{topic})
		if err == nil && total >= int64(want) {
			var msgs []kafka.Message
			for p, end := range ends[topic] {
				if end == 0 {
					continue
				}
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(brokers, ","), Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
				for {
					m, err := r.ReadMessage(ctx)
					if err != nil {
						r.Close()
						t.Fatalf("read %s/%d: %v", topic, p, err)
					}
					msgs = append(msgs, m)
					if m.Offset >= end-1 {
						break
					}
				}
				r.Close()
			}
			if distinct(msgs) >= want {
				return msgs
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s holds fewer than %d distinct events after %s (last error %v)", topic, want, timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func header(m kafka.Message, k string) string {
	for _, h := range m.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func distinct(msgs []kafka.Message) int {
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[header(m, "id")] = true
	}
	return len(ids)
}

// check asserts that every committed row arrived and that each key's
// first deliveries count 0, 1, 2, … in partition order; it returns the
// duplicates.
func check(t *testing.T, l *load, msgs []kafka.Message) int {
	t.Helper()
	sort.Slice(msgs, func(i, j int) bool {
		if msgs[i].Partition != msgs[j].Partition {
			return msgs[i].Partition < msgs[j].Partition
		}
		return msgs[i].Offset < msgs[j].Offset
	})
	seen := map[string]bool{}
	next := map[string]int{}
	dups := 0
	for _, m := range msgs {
		id := header(m, "id")
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		var p struct{ N int }
		_ = json.Unmarshal(m.Value, &p)
		k := string(m.Key)
		if p.N != next[k] {
			t.Errorf("key %s: n=%d first arrived when %d was next", k, p.N, next[k])
		}
		next[k] = p.N + 1
		delete(l.committed, fmt.Sprintf("%s/%d", k, p.N))
	}
	if len(l.committed) > 0 {
		t.Errorf("%d committed rows never arrived", len(l.committed))
	}
	return dups
}

// leaderOf returns the node (1-3) leading topic's partition p.
func leaderOf(t *testing.T, topic string, p int) int {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	for _, part := range md.Topics[0].Partitions {
		if part.ID == p {
			return part.Leader.ID
		}
	}
	t.Fatalf("%s has no partition %d", topic, p)
	return 0
}

// down stops broker n (SIGKILL, or SIGTERM when clean) and makes sure it is
// running again when the test ends, however it ends.
func down(t *testing.T, n int, clean bool) {
	t.Helper()
	stop := kc.Kill
	if clean {
		stop = kc.StopNode
	}
	if err := stop(n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if syscall.Kill(kc.PIDs[n-1], 0) != nil {
			if err := kc.StartNode(n); err != nil {
				t.Errorf("start broker %d again: %v", n, err)
			}
		}
	})
}

// up starts broker n again.
func up(t *testing.T, n int) {
	t.Helper()
	if err := kc.StartNode(n); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of one series on /metrics (0 when absent).
func (r *relay) metric(t *testing.T, series string) float64 {
	t.Helper()
	_, body := r.get(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
