package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/examples/orders"
	"github.com/outbox-cdc/outbox-cdc/inbox"
	"github.com/outbox-cdc/outbox-cdc/inbox/franz"
	"github.com/outbox-cdc/outbox-cdc/inbox/kafkago"
	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	outboxw "github.com/outbox-cdc/outbox-cdc/outbox"
)

// TestOutboxWriterAndInbox is the whole pattern from the services' side:
// the example orders service writes its changes and events in one
// transaction (a declined payment rolls both back), outbox.Writer inserts a
// batch through pgx and through database/sql, outbox-cdc relays them, and a
// consumer using inbox applies each event once though every record is
// delivered twice, as after a relay crash.
func TestOutboxWriterAndInbox(t *testing.T) {
	o := newOutbox(t, "pattern", defaultColumns)
	ctx := context.Background()
	startRelay(t, o.args()...)
	w := outboxw.NewWriter(outboxw.Config{Table: "public." + o.name})
	svc := &orders.Service{DB: o.db, Outbox: w, Table: o.name + "_orders"}
	if err := svc.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = o.db.Exec(ctx, "DROP TABLE IF EXISTS "+o.name+"_orders, "+o.name+"_inbox, "+o.name+"_applied")
	})

	if err := svc.Create(ctx, "A", 4250, "corr-A"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Pay(ctx, "A", "corr-A", nil); err != nil {
		t.Fatal(err)
	}
	if err := svc.Create(ctx, "B", 999, "corr-B"); err != nil {
		t.Fatal(err)
	}
	declined := errors.New("card declined")
	if err := svc.Pay(ctx, "B", "corr-B", func() error { return declined }); !errors.Is(err, declined) {
		t.Fatalf("declined payment: %v", err)
	}
	var status string
	_ = o.db.QueryRow(ctx, "SELECT status FROM "+o.name+"_orders WHERE id = 'B'").Scan(&status)
	if status != "new" {
		t.Errorf("order B is %q after a rolled-back payment", status)
	}

	// A batch of 2000 in one transaction, with each kind of payload.
	var batch []outboxw.Event
	payloads := map[int]string{}
	for i := range 2000 {
		ev := outboxw.Event{AggregateType: "order", AggregateID: fmt.Sprintf("bulk-%d", i%20), EventType: "Bulk"}
		switch i % 3 {
		case 0:
			ev.Payload = json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))
		case 1:
			ev.Payload = []byte(fmt.Sprintf(`{"i": %d, "raw": true}`, i))
		default:
			ev.Payload = map[string]int{"i": i}
		}
		batch = append(batch, ev)
	}
	tx, err := o.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	ids, err := w.Write(ctx, tx, batch...)
	if err != nil {
		t.Fatal(err)
	}
	writeTook := time.Since(began)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("event %d id %q: want a UUIDv7", i, id)
		}
		if i > 0 && ids[i-1] >= id {
			t.Fatalf("ids not time-ordered: %s then %s", ids[i-1], id)
		}
		switch i % 3 {
		case 0:
			payloads[i] = fmt.Sprintf(`{"i": %d}`, i)
		case 1:
			payloads[i] = fmt.Sprintf(`{"i": %d, "raw": true}`, i)
		default:
			payloads[i] = fmt.Sprintf(`{"i": %d}`, i) // jsonb's text form of the marshalled map
		}
	}

	// database/sql, through the pgx stdlib driver.
	std, err := sql.Open("pgx", pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer std.Close()
	stx, err := std.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stdIDs, err := w.WriteSQL(ctx, stx, outboxw.Event{AggregateType: "order", AggregateID: "std", EventType: "ViaDatabaseSQL", Payload: map[string]string{"via": "database/sql"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := svc.Create(ctx, "C", 100, "corr-C"); err != nil { // after the rollback, in WAL order
		t.Fatal(err)
	}

	want := 2 + 1 + 2000 + 1 + 1 // A created+paid, B created, the batch, database/sql, C created
	msgs := consume(t, []string{o.name + ".order"}, want, time.Minute)
	first, dups := byID(t, msgs)
	if len(first) != want {
		t.Errorf("%d distinct events, want %d", len(first), want)
	}
	for _, m := range msgs {
		typ, _ := testkit.Header(m, "event_type")
		if string(m.Key) == "B" && typ == "OrderPaid" {
			t.Errorf("the rolled-back OrderPaid of B was published")
		}
		if string(m.Key) == "A" {
			if c, _ := testkit.Header(m, "correlation_id"); c != "corr-A" {
				t.Errorf("order A event %s: correlation_id %q", typ, c)
			}
		}
	}
	for i, id := range ids {
		if m, ok := first[id]; !ok || string(m.Value) != payloads[i] {
			t.Fatalf("batch event %d (%s): value %q, want %q", i, id, m.Value, payloads[i])
		}
	}
	if m := first[stdIDs[0]]; string(m.Value) != `{"via": "database/sql"}` {
		t.Errorf("database/sql event value %q", m.Value)
	}
	t.Logf("orders service: a declined payment published nothing; batch of 2000 written in one statement in %s; %d events relayed, %d duplicates",
		writeTook.Round(time.Millisecond), len(first), dups)

	// The consumer: every record twice; each event applied once.
	box := inbox.New(o.name + "_inbox")
	if _, err := o.db.Exec(ctx, box.CreateTableSQL()); err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.Exec(ctx, "CREATE TABLE "+o.name+"_applied (aggregate_id text PRIMARY KEY, n int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	delivered, applied := 0, 0
	apply := func(rec inbox.Record, key string) {
		err := pgx.BeginFunc(ctx, o.db, func(tx pgx.Tx) error {
			first, err := box.Claim(ctx, tx, rec)
			if err != nil || !first {
				return err
			}
			applied++
			_, err = tx.Exec(ctx, "INSERT INTO "+o.name+"_applied VALUES ($1, 1) ON CONFLICT (aggregate_id) DO UPDATE SET n = "+o.name+"_applied.n + 1", key)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		delivered++
	}
	for pass := range 2 {
		for i, m := range sortedByOffset(msgs) {
			var rec inbox.Record
			var err error
			if (i+pass)%2 == 0 {
				rec, err = kafkago.FromMessage(m)
			} else {
				rec, err = franz.FromRecord(franzRecord(m))
			}
			if err != nil {
				t.Fatal(err)
			}
			apply(rec, string(m.Key))
		}
	}
	var total int
	_ = o.db.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM "+o.name+"_applied").Scan(&total)
	t.Logf("inbox: %d records delivered (each twice, half as kafka-go messages, half as franz-go records), %d applied, the side effect counted %d", delivered, applied, total)
	if applied != len(first) || total != len(first) {
		t.Errorf("applied %d, side effect %d; want each of the %d events once", applied, total, len(first))
	}
	if _, err := kafkago.FromMessage(kafka.Message{Topic: "x"}); !errors.Is(err, inbox.ErrNoID) {
		t.Errorf("a record without an id header: %v", err)
	}
}

func franzRecord(m kafka.Message) *kgo.Record {
	r := &kgo.Record{Topic: m.Topic, Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return r
}

// TestEnvelopesAndHeaders: header columns (renamed, NULL left out),
// traceparent and tracestate passed through, the CloudEvents binary mode
// checked against the spec's required attributes, and the ordering metadata.
func TestEnvelopesAndHeaders(t *testing.T) {
	o := newOutbox(t, "envelope", defaultColumns+`,
	correlation_id text, tenant_id text, traceparent text`)
	ctx := context.Background()
	startRelay(t, o.args("--header-column", "correlation_id", "--header-column", "tenant_id:tenant", "--header-column", "traceparent",
		"--envelope", "cloudevents", "--cloudevents-source", "/services/orders", "--metadata-headers")...)

	w := outboxw.NewWriter(outboxw.Config{Table: "public." + o.name})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tx, err := o.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := w.Write(ctx, tx,
		outboxw.Event{AggregateType: "order", AggregateID: "o-1", EventType: "com.example.order.created", Payload: map[string]int{"total": 42},
			Headers: map[string]string{"tracestate": "vendor=abc"},
			Columns: map[string]any{"correlation_id": "corr-1", "tenant_id": "acme", "traceparent": tp}},
		outboxw.Event{AggregateType: "order", AggregateID: "o-1", EventType: "com.example.order.paid", Payload: map[string]int{"total": 42},
			Columns: map[string]any{"correlation_id": "corr-1", "tenant_id": nil}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var xid string
	_ = o.db.QueryRow(ctx, "SELECT xmin::text FROM "+o.name+" WHERE id = $1", ids[0]).Scan(&xid)

	msgs := sortedByOffset(consume(t, []string{o.name + ".order"}, 2, time.Minute))
	if len(msgs) < 2 {
		t.FailNow()
	}
	var shown strings.Builder
	for _, h := range msgs[0].Headers {
		fmt.Fprintf(&shown, "\n  %s: %s", h.Key, h.Value)
	}
	t.Logf("a CloudEvents record as consumed: topic %s, partition %d, offset %d, key %q; headers:%s\n  value: %s",
		msgs[0].Topic, msgs[0].Partition, msgs[0].Offset, msgs[0].Key, shown.String(), msgs[0].Value)

	for i, m := range msgs {
		get := func(k string) string { v, _ := testkit.Header(m, k); return v }
		// CloudEvents 1.0 required attributes, binary mode of the Kafka
		// protocol binding: ce_id, ce_source, ce_specversion, ce_type.
		if get("ce_specversion") != "1.0" {
			t.Errorf("record %d: ce_specversion %q", i, get("ce_specversion"))
		}
		if get("ce_id") == "" || get("ce_id") != ids[i] || get("id") != ids[i] {
			t.Errorf("record %d: ce_id %q, id %q, want %s", i, get("ce_id"), get("id"), ids[i])
		}
		if src, err := url.Parse(get("ce_source")); get("ce_source") != "/services/orders" || err != nil || src.String() == "" {
			t.Errorf("record %d: ce_source %q is not the configured URI-reference", i, get("ce_source"))
		}
		if !regexp.MustCompile(`^[a-z0-9.]+$`).MatchString(get("ce_type")) || get("ce_type") != get("event_type") {
			t.Errorf("record %d: ce_type %q", i, get("ce_type"))
		}
		if ts, err := time.Parse(time.RFC3339Nano, get("ce_time")); err != nil || time.Since(ts) > time.Minute || time.Since(ts) < 0 {
			t.Errorf("record %d: ce_time %q is not a recent RFC 3339 time (%v)", i, get("ce_time"), err)
		}
		if get("content-type") != "application/json" || get("ce_subject") != "o-1" {
			t.Errorf("record %d: content-type %q, ce_subject %q", i, get("content-type"), get("ce_subject"))
		}
		if !json.Valid(m.Value) || string(m.Value) != `{"total": 42}` {
			t.Errorf("record %d: value %q, want the payload unchanged", i, m.Value)
		}
		for _, h := range m.Headers {
			if strings.HasPrefix(h.Key, "ce_") && !regexp.MustCompile(`^ce_[a-z0-9]{1,20}$`).MatchString(h.Key) {
				t.Errorf("record %d: attribute header %q breaks the CloudEvents naming rules", i, h.Key)
			}
		}
		// Ordering metadata: both rows share one transaction.
		if get("outbox_cdc.xid") != xid || get("outbox_cdc.commit_lsn") != get0(msgs, "outbox_cdc.commit_lsn") {
			t.Errorf("record %d: xid %q (want %s), commit_lsn %q", i, get("outbox_cdc.xid"), xid, get("outbox_cdc.commit_lsn"))
		}
		if _, err := time.Parse(time.RFC3339Nano, get("outbox_cdc.commit_time")); err != nil {
			t.Errorf("record %d: commit_time %q", i, get("outbox_cdc.commit_time"))
		}
		if get("correlation_id") != "corr-1" {
			t.Errorf("record %d: correlation_id %q", i, get("correlation_id"))
		}
	}
	first := func(k string) (string, bool) { return testkit.Header(msgs[0], k) }
	if v, _ := first("tenant"); v != "acme" {
		t.Errorf("tenant_id:tenant: %q", v)
	}
	if v, _ := first("traceparent"); v != tp {
		t.Errorf("traceparent %q, want it passed through", v)
	}
	if v, _ := first("tracestate"); v != "vendor=abc" {
		t.Errorf("tracestate (from the headers column) %q", v)
	}
	if _, ok := testkit.Header(msgs[1], "tenant"); ok {
		t.Errorf("a NULL header column was sent")
	}
}

func get0(msgs []kafka.Message, k string) string {
	v, _ := testkit.Header(msgs[0], k)
	return v
}
