package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// looseColumns is an outbox table that accepts what the relay must refuse.
const looseColumns = `
	id uuid primary key,
	aggregate_type text,
	aggregate_id text,
	event_type text,
	payload jsonb,
	headers jsonb,
	created_at timestamptz not null default now()`

// exec runs SQL statements on the test's database, failing the test on error.
func (o *outbox) exec(t *testing.T, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := o.db.Exec(context.Background(), strings.ReplaceAll(sql, "$T", o.name)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// insertOne inserts one row given as column values (nil is NULL).
func (o *outbox) insertOne(t *testing.T, id, aggType, aggID, evType any, payload any, headers any) string {
	t.Helper()
	if _, err := o.db.Exec(context.Background(), fmt.Sprintf(
		"INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4, $5, $6)", o.name),
		id, aggType, aggID, evType, payload, headers); err != nil {
		t.Fatalf("insert %v: %v", id, err)
	}
	return fmt.Sprint(id)
}

// deadLetters maps the dead letters' id (header, else column header) to
// their messages.
func deadLetters(t *testing.T, msgs []kafka.Message) map[string]kafka.Message {
	t.Helper()
	out := map[string]kafka.Message{}
	for _, m := range msgs {
		id, ok := testkit.Header(m, "id")
		if !ok {
			id, _ = testkit.Header(m, "outbox_cdc.column.id")
		}
		out[id] = m
	}
	return out
}

// TestInvalidRowsAreDeadLettered inserts every kind of row that cannot be
// published between valid ones: each lands in the dead-letter topic with its
// reason, the valid ones are published in order, the relay keeps running and
// the slot moves past all of them.
func TestInvalidRowsAreDeadLettered(t *testing.T) {
	o := newOutbox(t, "invalid", looseColumns)
	dlq := o.name + ".dlq"
	r := startRelay(t, o.args("--dlq-topic", dlq)...)
	id := func() string { return uuid.NewString() }

	valid := []string{}
	valid = append(valid, o.insertOne(t, id(), "order", "o-1", "created", `{"n": 0}`, nil))
	want := map[string]string{} // id → reason
	want[o.insertOne(t, id(), "order", nil, "created", `{}`, nil)] = "null_column"
	want[o.insertOne(t, id(), "order", "", "created", `{}`, nil)] = "empty_aggregate_id"
	want[o.insertOne(t, id(), "order", "o-1", "created", nil, nil)] = "null_column"
	want[o.insertOne(t, id(), "order", "o-1", "created", `{}`, `["not", "an", "object"]`)] = "invalid_headers"
	want[o.insertOne(t, id(), "order", "o-1", "created", `{}`, `"a string"`)] = "invalid_headers"
	big := `{"blob": "` + strings.Repeat("x", 2<<20) + `"}`
	bigID := o.insertOne(t, id(), "order", "o-1", "created", big, nil)
	want[bigID] = "message_too_large"
	want[o.insertOne(t, id(), "bad topic!", "o-1", "created", `{}`, nil)] = "invalid_topic"
	want[o.insertOne(t, id(), strings.Repeat("t", 250), "o-1", "created", `{}`, nil)] = "invalid_topic"
	// Non-string header members are kept as their JSON text; null ones are
	// left out.
	mixedID := o.insertOne(t, id(), "order", "o-1", "created", `{"n": 1}`, `{"a": 1, "b": true, "c": null, "d": "s", "e": {"f": [1]}}`)
	valid = append(valid, mixedID)
	// Insert and delete in one transaction: the insert is in the WAL, and
	// is published once.
	tx, err := o.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	transient := id()
	for _, sql := range []string{
		fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('%s', 'order', 'o-1', 'created', '{"n": 2}')`, o.name, transient),
		fmt.Sprintf(`DELETE FROM %s WHERE id = '%s'`, o.name, transient),
	} {
		if _, err := tx.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	valid = append(valid, transient)
	// UPDATE, DELETE and TRUNCATE publish nothing.
	o.exec(t, `UPDATE $T SET event_type = 'changed' WHERE aggregate_id = 'o-1'`,
		fmt.Sprintf(`DELETE FROM $T WHERE id = '%s'`, valid[0]))
	valid = append(valid, o.insertOne(t, id(), "order", "o-1", "created", `{"n": 3}`, nil))
	o.exec(t, `TRUNCATE $T`)
	last := o.insertOne(t, id(), "order", "o-1", "created", `{"n": 4}`, nil)
	valid = append(valid, last)
	end := o.CurrentLSN(t)

	msgs := consume(t, []string{o.name + ".order"}, len(valid), time.Minute)
	dead := deadLetters(t, consume(t, []string{dlq}, len(want), time.Minute))
	first, dups := byID(t, msgs)
	if len(first) != len(valid) || dups != 0 {
		t.Errorf("order topic: %d distinct events and %d duplicates, want %d and 0", len(first), dups, len(valid))
	}
	var ns []string
	for _, m := range sortedByOffset(msgs) {
		ns = append(ns, string(m.Value))
	}
	if got := strings.Join(ns, " "); got != `{"n": 0} {"n": 1} {"n": 2} {"n": 3} {"n": 4}` {
		t.Errorf("o-1's values in partition order: %s", got)
	}
	m := first[mixedID]
	for k, v := range map[string]string{"a": "1", "b": "true", "d": "s", "e": `{"f": [1]}`} {
		if got, ok := testkit.Header(m, k); !ok || got != v {
			t.Errorf("header %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := testkit.Header(m, "c"); ok {
		t.Errorf("header c (JSON null) should be left out")
	}

	for id, reason := range want {
		d, ok := dead[id]
		if !ok {
			t.Errorf("row %s (%s) is not in the dead-letter topic", id, reason)
			continue
		}
		if got, _ := testkit.Header(d, "outbox_cdc.reason"); got != reason {
			t.Errorf("row %s: reason %q, want %q", id, got, reason)
		}
		if got, _ := testkit.Header(d, "outbox_cdc.table"); got != "public."+o.name {
			t.Errorf("row %s: table header %q", id, got)
		}
		if got, _ := testkit.Header(d, "outbox_cdc.lsn"); got == "" || got == "0/0" {
			t.Errorf("row %s: lsn header %q", id, got)
		}
		if got, _ := testkit.Header(d, "outbox_cdc.error"); got == "" {
			t.Errorf("row %s: no error header", id)
		}
	}
	if d := dead[bigID]; d.Value != nil {
		t.Errorf("oversized row: dead letter carries a %d-byte value, want it left out", len(d.Value))
	} else if n, _ := testkit.Header(d, "outbox_cdc.value_bytes"); n != fmt.Sprint(len(big)) {
		t.Errorf("oversized row: value_bytes %q, want %d", n, len(big))
	}
	for id, d := range dead {
		if want[id] == "null_column" {
			if nulls, _ := testkit.Header(d, "outbox_cdc.null"); nulls == "" {
				t.Errorf("row %s: no outbox_cdc.null header naming the NULL column", id)
			}
		}
	}
	waitConfirmed(t, o, end, 30*time.Second)
	if got := r.Stop(t, syscall.SIGTERM, 30*time.Second); got != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", got)
	}
	t.Logf("%d events published, %d rows dead-lettered, slot past the last commit", len(first), len(dead))
}

// TestNonJSONPayloads: text and bytea payload columns pass through byte for
// byte.
func TestNonJSONPayloads(t *testing.T) {
	for _, typ := range []string{"text", "bytea"} {
		t.Run(typ, func(t *testing.T) {
			o := newOutbox(t, "payload_"+typ, strings.Replace(defaultColumns, "payload jsonb", "payload "+typ, 1))
			startRelay(t, o.args()...)
			values := [][]byte{[]byte("plain text, not JSON ✓"), []byte("{broken json"), []byte("x")}
			if typ == "bytea" {
				values = append(values, []byte{0, 0xff, 0x10, '\n', 0x80})
			}
			ids := map[string][]byte{}
			for _, v := range values {
				var p any = string(v)
				if typ == "bytea" {
					p = v
				}
				ids[o.insertOne(t, uuid.NewString(), "doc", "d-1", "written", p, nil)] = v
			}
			first, _ := byID(t, consume(t, []string{o.name + ".doc"}, len(ids), time.Minute))
			for id, v := range ids {
				if got := first[id].Value; !bytes.Equal(got, v) {
					t.Errorf("payload %q arrived as %q", v, got)
				}
			}
		})
	}
}

// TestOnInvalidFail: with --on-invalid=fail the relay stops at an invalid
// row with exit 1 and a message naming it, without confirming it; restarted
// with the default policy it dead-letters the row and goes on.
func TestOnInvalidFail(t *testing.T) {
	o := newOutbox(t, "onfail", looseColumns)
	r := startRelay(t, o.args("--on-invalid", "fail")...)
	before := o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 0}`, nil)
	consume(t, []string{o.name + ".order"}, 1, time.Minute)
	held := o.CurrentLSN(t)
	bad := o.insertOne(t, uuid.NewString(), "order", nil, "created", `{}`, nil)
	after := o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 1}`, nil)

	log := r.waitFailure(t, 30*time.Second, "an invalid row with --on-invalid=fail")
	if !strings.Contains(log, bad) || !strings.Contains(log, `column \"aggregate_id\" is NULL`) && !strings.Contains(log, `column "aggregate_id" is NULL`) {
		t.Errorf("log does not name the row %s and its fault:\n%s", bad, testkit.Tail(log, 5))
	}
	if c := o.Confirmed(t); c > held {
		t.Errorf("slot confirmed %s, past the invalid row's transaction (held at %s)", c, held)
	}

	dlq := o.name + ".dlq"
	startRelay(t, o.args("--dlq-topic", dlq)...)
	first, _ := byID(t, consume(t, []string{o.name + ".order"}, 2, time.Minute))
	if _, ok := first[after]; !ok {
		t.Errorf("the row after the invalid one was not published")
	}
	if _, ok := first[before]; !ok {
		t.Errorf("the row before the invalid one was not published")
	}
	if _, ok := deadLetters(t, consume(t, []string{dlq}, 1, time.Minute))[bad]; !ok {
		t.Errorf("the invalid row is not in the dead-letter topic after the restart")
	}
}

// TestMissingTopicAndBrokerLimits: with topic auto-creation off, an event
// routed to a topic that does not exist is dead-lettered after
// --missing-topic-timeout; a record the broker refuses as larger than its
// max.message.bytes (the relay's own limit set higher) is dead-lettered
// without its value; events around them keep their order.
func TestMissingTopicAndBrokerLimits(t *testing.T) {
	o := newOutbox(t, "limits", defaultColumns)
	dlq := o.name + ".dlq"
	createTopics(t, o.name+".order", dlq)
	startRelay(t, o.args("--dlq-topic", dlq, "--create-topics=false", "--kafka-auto-create-topics=false", "--log-level", "debug", "--missing-topic-timeout", "3s",
		"--max-message-bytes", "3000000")...)

	ids := []string{o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 0}`, nil)}
	missing := o.insertOne(t, uuid.NewString(), "nosuchtopic", "o-1", "created", `{}`, nil)
	// Incompressible, so that the batch is over the broker's limit even
	// compressed (lz4 is the default).
	noise := make([]byte, 1_200_000)
	_, _ = rand.Read(noise)
	huge := `{"blob": "` + base64.StdEncoding.EncodeToString(noise) + `"}`
	tooLarge := o.insertOne(t, uuid.NewString(), "order", "o-1", "created", huge, nil)
	ids = append(ids, o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 1}`, nil))

	msgs := consume(t, []string{o.name + ".order"}, len(ids), 2*time.Minute)
	dead := deadLetters(t, consume(t, []string{dlq}, 2, 2*time.Minute))
	if got, _ := testkit.Header(dead[missing], "outbox_cdc.reason"); got != "topic_missing" {
		t.Errorf("event routed to a missing topic: dead-letter reason %q, want topic_missing", got)
	}
	if got, _ := testkit.Header(dead[tooLarge], "outbox_cdc.reason"); got != "message_too_large" {
		t.Errorf("event over the broker's limit: dead-letter reason %q, want message_too_large", got)
	}
	var ns []string
	for _, m := range sortedByOffset(msgs) {
		ns = append(ns, string(m.Value))
	}
	if got := strings.Join(ns, " "); got != `{"n": 0} {"n": 1}` {
		t.Errorf("o-1's values in partition order: %s", got)
	}
	if exists := topicExists(t, o.name+".nosuchtopic"); exists {
		t.Errorf("topic %s.nosuchtopic was created with auto-creation off", o.name)
	}
}

func createTopics(t *testing.T, topics ...string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, name := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: name, NumPartitions: 3, ReplicationFactor: 1})
	}
	res, err := client.CreateTopics(context.Background(), req)
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
	for name, err := range res.Errors {
		if err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
	}
}

func topicExists(t *testing.T, topic string) bool {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	res, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return len(res.Topics) == 1 && res.Topics[0].Error == nil
}

// waitFailure waits for the relay to exit on its own after what, expects
// exit code 1, and returns its log.
func (r *relay) waitFailure(t *testing.T, within time.Duration, what string) string {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("relay still running %s after %s", within, what)
	}
	if code := r.Stop(t, syscall.SIGTERM, time.Second); code != 1 {
		t.Errorf("exit code %d after %s, want 1", code, what)
	}
	b, _ := os.ReadFile(r.log)
	return string(b)
}
