package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	outboxw "github.com/outbox-cdc/outbox-cdc/outbox"
)

// textPayloadColumns is defaultColumns with a text payload, which may hold
// what is not JSON.
var textPayloadColumns = strings.Replace(defaultColumns, "payload jsonb", "payload text", 1)

// TestContracts: rows and messages under --contracts, with
// --contracts-unknown=dead-letter. Valid payloads arrive; a payload that
// breaks its contract (in a file its contract's $ref names), one that is
// not JSON and a message that breaks it land in the dead-letter topic with
// reason contract_violation and where they fail in outbox_cdc.contract_error;
// an event type without a contract lands there as contract_missing; the
// violations are counted by event type; the stream goes on.
func TestContracts(t *testing.T) {
	o := newOutbox(t, "contracts", textPayloadColumns)
	installEmitSQL(t, o)
	dir := t.TempDir()
	for name, body := range map[string]string{
		"OrderPlaced.json": `{"type": "object", "required": ["id", "price"],
			"properties": {"id": {"type": "string"}, "price": {"$ref": "common/money.json"}}}`,
		"common/money.json": `{"type": "object", "required": ["amount", "currency"],
			"properties": {"amount": {"type": "number"}, "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dlq, topic, prefix := o.name+".dlq", o.name+".order", o.name
	r := startRelay(t, o.args("--dlq-topic", dlq, "--message-prefix", prefix, "--contracts", dir, "--contracts-unknown", "dead-letter")...)

	valid := `{"id": "o-1", "price": {"amount": 12.5, "currency": "EUR"}}`
	var published []string
	for range 5 {
		published = append(published, o.insertOne(t, uuid.NewString(), "order", "o-1", "OrderPlaced", valid, nil))
	}
	type refusal struct{ reason, location string }
	refused := map[string]refusal{
		o.insertOne(t, uuid.NewString(), "order", "o-1", "OrderPlaced", `{"id": "o-1", "price": {"amount": "12.5", "currency": "EUR"}}`, nil): {
			"contract_violation", `{"instanceLocation":"/price/amount","keywordLocation":"/properties/price/$ref/properties/amount/type","absoluteKeywordLocation":"common/money.json#/properties/amount/type"}`},
		o.insertOne(t, uuid.NewString(), "order", "o-1", "OrderPlaced", `not JSON`, nil): {
			"contract_violation", `{"instanceLocation":"","keywordLocation":""}`},
		o.insertOne(t, uuid.NewString(), "order", "o-1", "OrderShipped", valid, nil): {"contract_missing", ""},
	}
	// Messages are checked too.
	w := outboxw.NewWriter(outboxw.Config{Table: "public." + o.name, MessagePrefix: prefix})
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, o.db, func(tx pgx.Tx) error {
		ids, err := w.Emit(ctx, tx,
			outboxw.Event{AggregateType: "order", AggregateID: "o-2", EventType: "OrderPlaced", Payload: json.RawMessage(valid)},
			outboxw.Event{AggregateType: "order", AggregateID: "o-2", EventType: "OrderPlaced", Payload: json.RawMessage(`{"id": "o-2"}`)})
		if err == nil {
			published = append(published, ids[0])
			refused[ids[1]] = refusal{"contract_violation", `{"instanceLocation":"","keywordLocation":"/required"}`}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	published = append(published, o.insertOne(t, uuid.NewString(), "order", "o-1", "OrderPlaced", valid, nil)) // the stream went on

	got, dups := byID(t, consume(t, []string{topic}, len(published), time.Minute))
	if len(got) != len(published) || dups != 0 {
		t.Errorf("%s holds %d events (%d duplicates), want the %d valid ones", topic, len(got), dups, len(published))
	}
	for _, id := range published {
		if _, ok := got[id]; !ok {
			t.Errorf("valid event %s was not published", id)
		}
	}
	dead := deadLetters(t, consumeN(t, dlq, int64(len(refused)), time.Minute))
	for id, want := range refused {
		m, ok := dead[id]
		if !ok {
			t.Errorf("event %s (%s) was not dead-lettered", id, want.reason)
			continue
		}
		reason, _ := testkit.Header(m, "outbox_cdc.reason")
		loc, hasLoc := testkit.Header(m, "outbox_cdc.contract_error")
		if reason != want.reason || loc != want.location || hasLoc != (want.location != "") {
			t.Errorf("dead letter %s: reason %q, location %q; want %q, %q", id, reason, loc, want.reason, want.location)
		}
		if _, ok := got[id]; ok {
			t.Errorf("refused event %s was published too", id)
		}
	}
	waitMetric(t, r.HTTPAddr(t), `outbox_cdc_contract_violations_total{event_type="OrderPlaced"}`, 3)
	waitMetric(t, r.HTTPAddr(t), `outbox_cdc_events_dead_lettered_total{reason="contract_missing"}`, 1)
}

// waitMetric waits up to 30 s for the relay at addr to report want.
func waitMetric(t *testing.T, addr, name string, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		m, _ := testkit.Scrape(t, addr)
		if got = m[name]; got == want {
			return
		}
	}
	t.Errorf("%s = %v, want %v", name, got, want)
}
