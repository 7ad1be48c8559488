//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// clusterColumns have an id default, for the load writes only what it
// varies, and no headers.
const clusterColumns = `id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL,
	aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now()`

// outbox is a testkit.Outbox under the short names this package's tests
// use.
type outbox struct {
	*testkit.Outbox
	name string        // Outbox.Name: table, publication, slot and topic prefix
	db   *pgxpool.Pool // Outbox.DB
}

func newOutbox(t *testing.T, prefix string) *outbox {
	t.Helper()
	o := testkit.NewOutbox(t, pg.URL, prefix, testkit.WithColumns(clusterColumns))
	return &outbox{Outbox: o, name: o.Name, db: o.DB}
}

// args are the relay's flags: production topic settings, the proxies.
func (o *outbox) args(extra ...string) []string {
	return o.Args(brokers, append([]string{
		"--dlq-topic", o.name + ".dlq",
		"--topic-partitions", "3", "--topic-replication-factor", "3", "--topic-config", "min.insync.replicas=2",
		"--kafka-metadata-max-age", "5s",
	}, extra...)...)
}

// startRelay starts the package's outbox-cdc and waits until its slot
// streams.
func startRelay(t *testing.T, args ...string) *testkit.Relay {
	t.Helper()
	return testkit.StartRelay(t, testkit.RelayCommand{Binary: binary, Args: args, PostgresURL: pg.URL})
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

// consume waits until topic holds want distinct events (see
// testkit.Consume).
func consume(t *testing.T, topic string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	return testkit.Consume(t, brokers, []string{topic}, want, timeout)
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
		id, _ := testkit.Header(m, "id")
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
