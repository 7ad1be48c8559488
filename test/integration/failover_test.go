package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestFailover runs the relay on a primary with a physical standby under
// load, loses the primary and promotes the standby; the relay, given both
// hosts with target_session_attrs=read-write, carries on from the slot the
// standby kept in step (a failover slot, PostgreSQL 17+). Every row the new
// primary has arrives, in order per aggregate. Before the primary is lost,
// the standby is cut off and rows are committed that it never receives:
// with synchronized_standby_slots naming the standby's slot, none of them
// may reach Kafka (they would be ghosts: events of rows that, after the
// failover, never existed); without it the test reports how many did.
func TestFailover(t *testing.T) {
	if v := serverVersion(t, newOutbox(t, "version", defaultColumns)); v < 170000 {
		t.Skipf("failover slots need PostgreSQL 17 or newer; the suite runs %d (make test-matrix runs this on 17 and 18)", v)
	}
	for _, delivery := range []string{"at-least-once", "exactly-once"} {
		for _, guarded := range []bool{true, false} {
			name := delivery + "/synchronized_standby_slots"
			if !guarded {
				name = delivery + "/no_synchronized_standby_slots"
			}
			t.Run(name, func(t *testing.T) { failover(t, guarded, delivery == "exactly-once") })
		}
	}
}

// failover runs the promotion; exactly, with --delivery exactly-once and
// read at read_committed: no row read twice, none lost, with or without
// synchronized_standby_slots (the checkpoint trusted up to the point the
// new timeline branched, and past it the old timeline's ghosts reported).
func failover(t *testing.T, guarded, exactly bool) {
	if exactly { // what the test reads, it reads at read_committed
		t.Setenv("OUTBOX_TEST_DELIVERY", "exactly-once")
	}
	ctx := context.Background()
	primary, err := testkit.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	standby, err := testkit.StartStandby(primary, "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	exec := func(url string, stmts ...string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	if guarded {
		exec(primary.URL, `ALTER SYSTEM SET synchronized_standby_slots = 'standby1'`, `SELECT pg_reload_conf()`)
	}
	name := fmt.Sprintf("failover_%d", time.Now().UnixNano()%1e9)
	exec(primary.URL, fmt.Sprintf("CREATE TABLE %s (%s)", name, defaultColumns))

	// Both servers, the writable one first: what an application is given.
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.Port, standby.Port)
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	args := []string{"--postgres-url", url, "--kafka-brokers", broker.Brokers,
		"--table", "public." + name, "--publication", name, "--slot", name, "--topic", name + ".{aggregate_type}",
		"--status-interval", "1s", "--http-addr", ""}
	if exactly {
		args = append(args, "--delivery", "exactly-once")
	}
	r := startRelayNoWait(t, args...)
	topic := name + ".order"
	started := time.Now()
	slotQuery := `SELECT coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots WHERE slot_name = $1`
	waitFor(t, r, 60*time.Second, "the relay streams from the primary", func() bool {
		var active bool
		return db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&active) == nil && active
	})

	w := &trickle{db: db, table: name, next: map[string]int{}}
	stop := w.start()
	standbyDB, err := pgx.Connect(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer standbyDB.Close(ctx)
	// The standby's copy of the slot must be persistent (sync-ready) and
	// moving before the primary can be lost. It becomes so once the slot's
	// catalog xmin on the primary passes the standby's, which takes a
	// running-transactions record decoded and confirmed: the background
	// writer logs one every 15 s; the test logs them sooner.
	var firstSynced string
	waitFor(t, r, 60*time.Second, "the standby holds a synchronized, persistent copy of the slot that has moved", func() bool {
		_, _ = db.Exec(ctx, `SELECT pg_log_standby_snapshot()`)
		var lsn string
		var synced, temporary bool
		if standbyDB.QueryRow(ctx, `SELECT synced, temporary, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, name).
			Scan(&synced, &temporary, &lsn) != nil || !synced || temporary {
			return false
		}
		if firstSynced == "" {
			firstSynced = lsn
		}
		return lsn != firstSynced && w.count() > 200
	})
	checkFailoverReports(t, name, url, primary, standby, guarded)
	t.Logf("the standby's copy of the slot is in step %s after the relay began, %d transactions written", time.Since(started).Round(time.Millisecond), w.count())

	// Cut the standby off under load: the relay has committed to Kafka
	// what the standby's copy of the slot, synchronized only every so
	// often, may not say yet. From here the primary commits rows the
	// standby never gets.
	stop()
	exec(standby.URL, `ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`)
	waitFor(t, r, 30*time.Second, "the standby's WAL receiver stops", func() bool {
		var n int
		return standbyDB.QueryRow(ctx, `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&n) == nil && n == 0
	})
	unreplicated := w.writeN(t, 50)
	var published int
	if guarded {
		time.Sleep(3 * time.Second) // ample for the relay to publish them, were it allowed to
		published = countPublished(t, topic, unreplicated)
	} else {
		deadline := time.Now().Add(30 * time.Second)
		for published < len(unreplicated) && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			published = countPublished(t, topic, unreplicated)
		}
	}
	var primarySlot string
	_ = db.QueryRow(ctx, slotQuery, name).Scan(&primarySlot)

	// Lose the primary; promote the standby; write on it.
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	var standbySlot string
	_ = standbyDB.QueryRow(ctx, slotQuery, name).Scan(&standbySlot)
	stop = w.start()
	waitFor(t, r, 60*time.Second, "writes succeed on the promoted standby", func() bool { return w.count() > 0 && w.sinceFailover() > 300 })
	stop()
	t.Logf("%d transactions on the promoted standby %s after the promotion", w.sinceFailover(), time.Since(began).Round(time.Millisecond))

	// What the new primary has is what must arrive: all of it, and nothing else.
	have := map[string]bool{}
	rows, err := db.Query(ctx, fmt.Sprintf("SELECT id::text FROM %s", name))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	msgs := consume(t, []string{topic}, len(have), 90*time.Second)
	first, dups := byID(t, msgs)
	missing, ghosts := 0, 0
	for id := range have {
		if _, ok := first[id]; !ok {
			missing++
		}
	}
	for id := range first {
		if !have[id] {
			ghosts++
		}
	}
	checkIncreasing(t, msgs, have)
	if missing > 0 {
		t.Errorf("%d of the %d rows on the promoted standby never arrived", missing, len(have))
	}
	if !strings.Contains(r.LogText(), "stream interrupted, reconnecting") {
		t.Errorf("the relay did not log its reconnection")
	}
	if code := r.Stop(t, 15, 30*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	t.Logf("exactly-once=%v, synchronized_standby_slots=%v: %d rows on the new primary arrived (%d duplicates) within %s of the promotion; "+
		"of %d rows committed on the old primary after the standby was cut off, %d were published before it was lost; ghosts: %d "+
		"(slot on the old primary at %s, its synchronized copy at %s)",
		exactly, guarded, len(have), dups, time.Since(began).Round(time.Millisecond), len(unreplicated), published, ghosts, primarySlot, standbySlot)
	if guarded && (ghosts > 0 || published > 0) {
		t.Errorf("with synchronized_standby_slots, %d events whose rows the standby never received were published (%d ghosts)", published, ghosts)
	}
	if !guarded && ghosts != published {
		t.Errorf("%d ghosts, but %d rows the standby never received were published", ghosts, published)
	}
	if exactly && dups != 0 {
		t.Errorf("exactly-once: %d rows read twice at read_committed across the promotion, want none", dups)
	}
	if exactly && ghosts > 0 && !strings.Contains(r.LogText(), "which the server never had") {
		t.Errorf("exactly-once: %d ghosts, and the log names no ghost range", ghosts)
	}
}

// checkFailoverReports runs status on both servers and check on the
// primary: the slot is failover-enabled, the standby's copy synchronized,
// and without synchronized_standby_slots check warns of ghost events.
func checkFailoverReports(t *testing.T, name, url string, primary, standby *testkit.Postgres, guarded bool) {
	t.Helper()
	target := []string{"--table", "public." + name, "--slot", name, "--publication", name}
	_, out := runOnce(t, append([]string{"status", "--postgres-url", primary.URL}, target...)...)
	want := "failover:      yes: failover-enabled, 1 physical standby(s) streaming, changes held until standby1 have them"
	if !guarded {
		want = "failover:      yes: failover-enabled, 1 physical standby(s) streaming; but synchronized_standby_slots is not set"
	}
	if !strings.Contains(out, want) {
		t.Errorf("status on the primary lacks %q:\n%s", want, out)
	}
	_, out = runOnce(t, append([]string{"status", "--postgres-url", standby.URL}, target...)...)
	if want := "failover:      yes: this server is a standby and its copy of the slot is synchronized"; !strings.Contains(out, want) {
		t.Errorf("status on the standby lacks %q:\n%s", want, out)
	}
	_, out = runOnce(t, append([]string{"check", "--postgres-url", url, "--kafka-brokers", broker.Brokers, "--topic", name + ".{aggregate_type}"}, target...)...)
	warned := strings.Contains(out, "[warn] slot failover: slot \""+name+"\" may publish events whose rows a promoted standby never received")
	if warned == guarded {
		t.Errorf("synchronized_standby_slots set: %v, check warns of ghost events: %v:\n%s", guarded, warned, out)
	}
}

// waitFor polls cond every 100 ms until it holds, failing after timeout or
// when the relay exits.
func waitFor(t *testing.T, r *relay, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-r.done:
			t.Fatalf("waiting until %s: outbox-cdc exited: %v\n%s", what, r.Err(), testkit.Tail(r.LogText(), 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not so after %s: %s\n%s", timeout, what, testkit.Tail(r.LogText(), 20))
		}
	}
}

// countPublished counts the ids among msgs on topic.
func countPublished(t *testing.T, topic string, ids []string) int {
	t.Helper()
	ends, total, err := endOffsets(topic)
	if err != nil || total == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, _ := byID(t, testkit.ReadAll(ctx, t, broker.Brokers, ends))
	n := 0
	for _, id := range ids {
		if _, ok := first[id]; ok {
			n++
		}
	}
	return n
}

// checkIncreasing asserts that each aggregate's events among keep arrive,
// at their first delivery, with n increasing: the failover loses rows (and
// their numbers) but must not reorder those it keeps.
func checkIncreasing(t *testing.T, msgs []kafka.Message, keep map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for _, m := range sortedByOffset(msgs) {
		id, _ := testkit.Header(m, "id")
		if seen[id] || !keep[id] {
			continue
		}
		seen[id] = true
		var p struct{ N int }
		if err := json.Unmarshal(m.Value, &p); err != nil {
			t.Fatalf("event %s payload %q: %v", id, m.Value, err)
		}
		agg := string(m.Key)
		if prev, ok := last[agg]; ok && p.N <= prev {
			t.Errorf("aggregate %s: n=%d arrived after n=%d", agg, p.N, prev)
		}
		last[agg] = p.N
	}
}

// trickle commits small transactions over 8 aggregates, numbering each
// aggregate's events; a failed commit is not retried (its numbers are
// skipped), since after a failover only the new primary says what exists.
type trickle struct {
	db    *pgxpool.Pool
	table string

	mu        sync.Mutex
	next      map[string]int
	ok, after int // commits, and commits since the last start
}

func (w *trickle) count() int         { w.mu.Lock(); defer w.mu.Unlock(); return w.ok }
func (w *trickle) sinceFailover() int { w.mu.Lock(); defer w.mu.Unlock(); return w.after }

// start writes until the returned func is called.
func (w *trickle) start() (stop func()) {
	w.mu.Lock()
	w.after = 0
	w.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := w.commit(ctx, 4); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// writeN commits n one-row transactions and returns their ids.
func (w *trickle) writeN(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		id, err := w.commit(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id...)
	}
	return ids
}

func (w *trickle) commit(ctx context.Context, size int) ([]string, error) {
	w.mu.Lock()
	batch := &pgx.Batch{}
	ids := make([]string, size)
	for i := range size {
		agg := fmt.Sprintf("agg-%d", (w.ok*size+i)%8)
		ids[i] = uuid.NewString()
		batch.Queue(fmt.Sprintf("INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', $2, 'e', $3)", w.table),
			ids[i], agg, fmt.Sprintf(`{"n": %d}`, w.next[agg]))
		w.next[agg]++
	}
	w.mu.Unlock()
	tx, err := w.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.ok++
	w.after++
	w.mu.Unlock()
	return ids, nil
}
