package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// TestExactlyOnceRestoredDatabase restores a database from a storage
// snapshot under an exactly-once relay. The relay publishes A, stops; the
// cluster is snapshotted; the relay publishes B, stops, its checkpoint
// naming B's last transaction. The snapshot is restored (same system
// identifier, timeline and slot, the slot back at A), new rows C are
// committed there, and WAL written until the server's WAL end passes the
// checkpoint's, with fewer transactions than B took: the LSNs alone look
// sound, and a relay trusting the checkpoint would skip C for good. The
// relay must stop instead, saying the database was restored and naming the
// key to reset; after the documented reset (a tombstone under that key)
// it starts from the slot and publishes C.
func TestExactlyOnceRestoredDatabase(t *testing.T) {
	t.Setenv("OUTBOX_TEST_DELIVERY", "exactly-once") // what the test reads, it reads at read_committed
	ctx := context.Background()
	server, err := testkit.StartPostgres() // a cluster of its own: the test takes it back in time
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop() }) // registered first: runs after the outbox's cleanup
	ob := testkit.NewOutbox(t, server.URL, "restored")
	o := &outbox{Outbox: ob, name: ob.Name, db: ob.DB}
	args := exactlyArgs(o)
	topics, ckptTopic := []string{o.name + ".order"}, o.name+".checkpoints"
	start := func(noWait bool) *relay {
		return startRelayWith(t, testkit.RelayCommand{Binary: binary, Args: args, PostgresURL: server.URL, NoWait: noWait})
	}
	stop := func(r *relay) {
		t.Helper()
		if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("SIGTERM: exit %d\n%s", code, testkit.Tail(r.LogText(), 30))
		}
	}

	r := start(false)
	a := insertSingles(ctx, t, server.URL, o.name, 5)
	consumeCommitted(t, topics, len(a), time.Minute)
	stop(r)
	if err := server.Snapshot(); err != nil {
		t.Fatal(err)
	}

	r = start(false)
	b := insertSingles(ctx, t, server.URL, o.name, 50)
	consumeCommitted(t, topics, len(a)+len(b), time.Minute)
	stop(r)
	sysID := query[string](ctx, t, server.URL, `SELECT system_identifier::text FROM pg_control_system()`)
	key := checkpoint.Key(sysID, o.name)
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 30 * time.Second, Transport: &kafka.Transport{}}
	rec, found, err := producer.NewCluster(client).ReadCheckpoint(ctx, ckptTopic, key)
	if err != nil || !found || !rec.HasXid() {
		t.Fatalf("the checkpoint after B: %+v (found %v, %v), want one naming a transaction", rec, found, err)
	}

	if err := server.RestoreSnapshot(); err != nil {
		t.Fatal(err)
	}
	if n := query[int64](ctx, t, server.URL, fmt.Sprintf("SELECT count(*) FROM %s", pgx.Identifier{o.name}.Sanitize())); n != int64(len(a)) {
		t.Fatalf("the restored database holds %d rows, want A's %d", n, len(a))
	}
	c := insertSingles(ctx, t, server.URL, o.name, 3)
	if at := walLSN(ctx, t, server.URL); at >= rec.EndLSN {
		t.Fatalf("C ends at %s, past the checkpoint's end %s: a relay trusting it would not skip C, the test proves nothing", at, rec.EndLSN)
	}
	padWAL(ctx, t, server.URL, rec.EndLSN)
	if next := nextXid(ctx, t, server.URL); next > uint64(rec.Xid) {
		t.Fatalf("the restored server's next transaction id %d is past the checkpoint's %d: the simulation took more transactions than B", next, rec.Xid)
	}

	r = start(true)
	said := r.waitFailure(t, time.Minute, "starting on the restored database")
	for _, want := range []string{"restored from a snapshot or a backup", key, ckptTopic, "tombstone", fmt.Sprintf("xid %d", rec.Xid)} {
		if !strings.Contains(said, want) {
			t.Errorf("the relay's log does not say %q:\n%s", want, testkit.Tail(said, 20))
		}
	}
	if got := countPublished(t, topics[0], c); got != 0 {
		t.Errorf("%d of C's %d events published by a relay that should have stopped", got, len(c))
	}

	// The reset docs/exactly-once.md gives: a tombstone under the key.
	resetCheckpoint(ctx, t, ckptTopic, key)
	r = start(false)
	msgs := consumeCommitted(t, topics, len(a)+len(b)+len(c), time.Minute)
	if got := countIn(msgs, c); got != len(c) {
		t.Errorf("after the reset, %d of C's %d events published", got, len(c))
	}
	stop(r)
}

// insertSingles commits n outbox rows into table of the Postgres at url,
// one transaction each, and returns their ids.
func insertSingles(ctx context.Context, t *testing.T, url, table string, n int) []string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	stmt := fmt.Sprintf("INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', $2, 'created', $3)",
		pgx.Identifier{table}.Sanitize())
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		if _, err := conn.Exec(ctx, stmt, ids[i], "order-"+strconv.Itoa(i), fmt.Sprintf(`{"n":%d}`, i)); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	return ids
}

// query returns the one value sql selects in the Postgres at url.
func query[T any](ctx context.Context, t *testing.T, url, sql string, args ...any) T {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v T
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// walLSN is the Postgres at url's current WAL insert position.
func walLSN(ctx context.Context, t *testing.T, url string) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(query[string](ctx, t, url, `SELECT pg_current_wal_insert_lsn()::text`))
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// nextXid is the Postgres at url's next full transaction id.
func nextXid(ctx context.Context, t *testing.T, url string) uint64 {
	t.Helper()
	next, err := strconv.ParseUint(query[string](ctx, t, url, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// padWAL writes WAL in the Postgres at url, in as few transactions as it
// can (a table of its own, a large insert each), until the WAL end is
// past end.
func padWAL(ctx context.Context, t *testing.T, url string, end pglogrepl.LSN) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS restore_padding (b text)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; walLSN(ctx, t, url) <= end; i++ {
		if i == 20 {
			t.Fatalf("the WAL end %s is still before the checkpoint's %s after 20 inserts", walLSN(ctx, t, url), end)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO restore_padding SELECT repeat('x', 1000) FROM generate_series(1, $1::int)`, 2000); err != nil {
			t.Fatal(err)
		}
	}
	// The WAL end IDENTIFY_SYSTEM reports is the flushed one.
	if _, err := conn.Exec(ctx, `SELECT pg_switch_wal()`); err != nil {
		t.Fatal(err)
	}
}

// resetCheckpoint writes a tombstone under key to the checkpoint topic.
func resetCheckpoint(ctx context.Context, t *testing.T, topic, key string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(broker.Brokers, ",")...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: nil}).FirstErr(); err != nil {
		t.Fatalf("write the tombstone: %v", err)
	}
}

// countIn counts the ids that messages carry (their id header).
func countIn(msgs []kafka.Message, ids []string) int {
	seen := map[string]bool{}
	for _, m := range msgs {
		if id, ok := testkit.Header(m, "id"); ok {
			seen[id] = true
		}
	}
	n := 0
	for _, id := range ids {
		if seen[id] {
			n++
		}
	}
	return n
}
