package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/message"
	outboxw "github.com/outbox-cdc/outbox-cdc/outbox"
)

// installEmitSQL runs sql/outbox_emit.sql, as a user would with psql -f.
func installEmitSQL(t *testing.T, o *outbox) {
	t.Helper()
	root, err := testkit.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "sql", "outbox_emit.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.Exec(context.Background(), string(b), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("install sql/outbox_emit.sql: %v", err)
	}
}

// expected is one event a test wrote and how it must arrive.
type expected struct {
	id, agg, value string
	n              int               // the aggregate's counter: commit order
	headers        map[string]string // headers it must carry
}

// TestMessages writes transactions that mix outbox rows, messages from
// outbox.Writer's Emit and messages from sql/outbox_emit.sql, on one
// aggregate's counter: every committed event must arrive, in commit order
// within each aggregate (rows and messages interleaved as written), with
// its payload byte for byte; rolled-back ones never; malformed messages go
// to the dead-letter topic and the stream goes on; a non-transactional
// message arrives even from a transaction that rolled back; and the slot
// is confirmed past all of it.
func TestMessages(t *testing.T) {
	o := newOutbox(t, "msgs", defaultColumns)
	installEmitSQL(t, o)
	prefix := o.name // messages are database-wide: each test has its own prefix
	dlq := o.name + ".dlq"
	startRelay(t, o.args("--message-prefix", prefix, "--dlq-topic", dlq)...)
	w := outboxw.NewWriter(outboxw.Config{Table: "public." + o.name, MessagePrefix: prefix})
	ctx := context.Background()

	var want []expected
	rolledBack := map[string]bool{}
	counters := map[string]int{}
	const txs, aggs = 120, 4
	for i := range txs {
		agg := fmt.Sprintf("agg-%d", i%aggs)
		commit := i%10 != 7
		var mine []expected
		err := pgx.BeginFunc(ctx, o.db, func(tx pgx.Tx) error {
			n := counters[agg]
			next := func() int { n++; return n - 1 }
			// A row.
			row := expected{id: uuid.NewString(), agg: agg, n: next()}
			row.value = fmt.Sprintf(`{"n": %d, "via": "row"}`, row.n)
			if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', $2, 'row', $3)`, o.name),
				row.id, agg, row.value); err != nil {
				return err
			}
			// Two messages from Go in one statement, the payload's spacing kept.
			g1, g2 := expected{agg: agg, n: next(), headers: map[string]string{"correlation_id": "c-" + agg}}, expected{agg: agg, n: next()}
			g1.value = fmt.Sprintf(`{"n":   %d,  "via": "go"}`, g1.n)
			g2.value = fmt.Sprintf(`{"n": %d, "via": "go", "note": "héllo"}`, g2.n)
			ids, err := w.Emit(ctx, tx,
				outboxw.Event{AggregateType: "order", AggregateID: agg, EventType: "go", Payload: json.RawMessage(g1.value), Headers: g1.headers},
				outboxw.Event{AggregateType: "order", AggregateID: agg, EventType: "go", Payload: json.RawMessage(g2.value)})
			if err != nil {
				return err
			}
			g1.id, g2.id = ids[0], ids[1]
			// One from SQL: jsonb keeps its own text form.
			s := expected{agg: agg, n: next(), headers: map[string]string{"tenant": "t-1", "attempt": "2"}}
			if err := tx.QueryRow(ctx, `SELECT outbox_emit_bytes('order', $1, 'sql', convert_to(($2::jsonb)::text, 'UTF8'), 'application/json', '{"tenant": "t-1", "attempt": 2, "gone": null}', NULL, $3)`,
				agg, fmt.Sprintf(`{"via": "sql", "n": %d}`, s.n), prefix).Scan(&s.id); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT ($1::jsonb)::text`, fmt.Sprintf(`{"via": "sql", "n": %d}`, s.n)).Scan(&s.value); err != nil {
				return err
			}
			mine = []expected{row, g1, g2, s}
			if !commit {
				return errRollback
			}
			counters[agg] = n
			return nil
		})
		switch {
		case !commit && err == errRollback:
			for _, e := range mine {
				rolledBack[e.id] = true
			}
		case err != nil:
			t.Fatalf("transaction %d: %v", i, err)
		default:
			want = append(want, mine...)
		}
	}

	// Malformed messages in a committed transaction, and a non-transactional
	// one from a transaction that rolls back.
	standalone := message.Event{ID: uuid.NewString(), AggregateType: "order", AggregateID: "solo", EventType: "standalone", Payload: []byte(`{"n": 0}`)}
	content, err := message.Append(nil, &standalone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, '\x02ffff'::bytea), pg_logical_emit_message(true, $1, '\x0100000009616263'::bytea)`, prefix); err != nil {
		t.Fatal(err)
	}
	tx, err := o.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(false, $1, $2::bytea)`, prefix, content); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	want = append(want, expected{id: standalone.ID, agg: "solo", value: `{"n": 0}`})
	// And a last row after all that: the stream went on.
	last := expected{id: uuid.NewString(), agg: "agg-0", n: counters["agg-0"], value: fmt.Sprintf(`{"n": %d, "via": "row"}`, counters["agg-0"])}
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', 'agg-0', 'row', $2)`, o.name), last.id, last.value); err != nil {
		t.Fatal(err)
	}
	want = append(want, last)
	end := o.CurrentLSN(t)

	msgs := consume(t, []string{o.name + ".order"}, len(want), time.Minute)
	first, dups := byID(t, msgs)
	for _, e := range want {
		m, ok := first[e.id]
		switch {
		case !ok:
			t.Errorf("event %s (%s n=%d) never arrived", e.id, e.agg, e.n)
			continue
		case string(m.Key) != e.agg:
			t.Errorf("event %s key %q, want %q", e.id, m.Key, e.agg)
		case string(m.Value) != e.value:
			t.Errorf("event %s value %q, want %q byte for byte", e.id, m.Value, e.value)
		}
		for k, v := range e.headers {
			if got, _ := testkit.Header(m, k); got != v {
				t.Errorf("event %s header %s = %q, want %q", e.id, k, got, v)
			}
		}
		if time.Since(m.Time) > time.Hour || m.Time.After(time.Now().Add(time.Minute)) {
			t.Errorf("event %s timestamp %s is not its commit time", e.id, m.Time)
		}
	}
	for id := range rolledBack {
		if _, ok := first[id]; ok {
			t.Errorf("event %s of a rolled-back transaction arrived", id)
		}
	}
	checkOrder(t, msgs)

	dead := consumeN(t, dlq, 2, time.Minute)
	reasons := map[string]bool{}
	for _, m := range dead {
		r, _ := testkit.Header(m, "outbox_cdc.reason")
		table, _ := testkit.Header(m, "outbox_cdc.table")
		reasons[r] = true
		if table != decode.MessageSource+prefix {
			t.Errorf("dead letter from %q, want %q", table, decode.MessageSource+prefix)
		}
	}
	if !reasons[message.ReasonVersion] || !reasons[message.ReasonMalformed] {
		t.Errorf("dead letters with reasons %v, want %s and %s", reasons, message.ReasonVersion, message.ReasonMalformed)
	}
	waitConfirmed(t, o, end, 30*time.Second)
	t.Logf("%d events (rows and messages interleaved) in commit order, %d rolled back absent, 2 malformed dead-lettered, %d duplicates", len(want), len(rolledBack), dups)
}

// consumeN waits until topic holds n messages, and returns them: for dead
// letters, which may have no id to count by.
func consumeN(t *testing.T, topic string, n int64, timeout time.Duration) []kafka.Message {
	t.Helper()
	return consumeNAt(t, broker.Brokers, topic, n, timeout)
}

// consumeNAt is consumeN from another broker.
func consumeNAt(t *testing.T, brokers, topic string, n int64, timeout time.Duration) []kafka.Message {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		ends, total, err := testkit.EndOffsets(ctx, client, []string{topic})
		if err == nil && total >= n {
			return testkit.ReadAll(ctx, t, brokers, ends)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s holds %d messages after %s, want %d (last error: %v)", topic, total, timeout, n, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// errRollback ends a transaction the test means to roll back.
var errRollback = fmt.Errorf("roll back")

// checkOrder asserts that, reading each partition in offset order, the
// first delivery of each aggregate's events counts n = 0, 1, 2, ...
func checkOrder(t *testing.T, msgs []kafka.Message) {
	t.Helper()
	seen := map[string]bool{}
	next := map[string]int{}
	for _, m := range sortedByOffset(msgs) {
		id, _ := testkit.Header(m, "id")
		if seen[id] {
			continue
		}
		seen[id] = true
		var p struct{ N int }
		if err := json.Unmarshal(m.Value, &p); err != nil {
			t.Fatalf("event %s payload %q: %v", id, m.Value, err)
		}
		if agg := string(m.Key); p.N != next[agg] {
			t.Errorf("aggregate %s: event n=%d arrived when n=%d was next", agg, p.N, next[agg])
			next[agg] = p.N + 1
		} else {
			next[agg]++
		}
	}
}

// TestMessagesKilled relays messages alone (no outbox table) under load and
// kills the relay mid-stream: a restart delivers every committed event, in
// order per aggregate.
func TestMessagesKilled(t *testing.T) {
	o := newOutbox(t, "msgkill", defaultColumns)
	prefix := o.name
	args := o.args("--table", "", "--message-prefix", prefix, "--max-in-flight", "2000")
	r := startRelay(t, args...)
	w := outboxw.NewWriter(outboxw.Config{MessagePrefix: prefix})
	ctx := context.Background()

	const total, perTx, aggs = 12000, 60, 40
	committed := make(chan int, 1)
	go func() { // owned by the test: ends after total events or the first error
		counters := map[string]int{}
		done := 0
		defer func() { committed <- done }()
		for done < total {
			events := make([]outboxw.Event, perTx)
			for i := range events {
				agg := fmt.Sprintf("agg-%d", (done+i)%aggs)
				events[i] = outboxw.Event{AggregateType: "order", AggregateID: agg, EventType: "e", Payload: map[string]int{"n": counters[agg]}}
				counters[agg]++
			}
			if err := pgx.BeginFunc(ctx, o.db, func(tx pgx.Tx) error { _, err := w.Emit(ctx, tx, events...); return err }); err != nil {
				t.Errorf("emit: %v", err)
				return
			}
			done += perTx
			time.Sleep(15 * time.Millisecond)
		}
	}()
	consume(t, []string{o.name + ".order"}, total/4, time.Minute)
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	n := <-committed
	if n != total {
		t.Fatalf("%d of %d events committed", n, total)
	}
	startRelay(t, args...)
	msgs := consume(t, []string{o.name + ".order"}, total, 2*time.Minute)
	_, dups := byID(t, msgs)
	checkOrder(t, msgs)
	t.Logf("kill -9 while relaying messages: %d events delivered, %d duplicates", testkit.Distinct(msgs), dups)
}

// TestMessagesAloneCommands: setup and check know an outbox without a
// table: an empty publication, and the message topic among the Kafka items.
func TestMessagesAloneCommands(t *testing.T) {
	o := newOutbox(t, "msgcmd", defaultColumns)
	base := []string{"--postgres-url", pg.URL, "--table", "", "--publication", o.name, "--slot", o.name}
	code, printed := runOnce(t, append(append([]string{"setup"}, base...), "--print")...)
	if want := fmt.Sprintf(`CREATE PUBLICATION "%s" WITH (publish = 'insert');`, o.name); code != 0 || !strings.Contains(printed, want) {
		t.Errorf("setup --print (exit %d) lacks %q:\n%s", code, want, printed)
	}
	if code, out := runOnce(t, append([]string{"setup"}, base...)...); code != 0 {
		t.Fatalf("setup: exit %d\n%s", code, out)
	}
	code, out := runOnce(t, append(append([]string{"check"}, base...), "--kafka-brokers", broker.Brokers, "--message-prefix", o.name, "--topic", o.name+".{event_type}")...)
	for _, want := range []string{
		fmt.Sprintf(`[ok  ] messages: transactional logical decoding messages with prefix %q are events`, o.name),
		"publishes INSERTs of no table (messages only)",
		o.name + ".{event_type} names a topic per row",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("check exit %d, want 0:\n%s", code, out)
	}
}
