package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// The tables of widely used polling outbox designs, relayed by
// configuration alone (issue: replace a polling relay in place).

const efCoreColumns = `id uuid primary key, type varchar(500) not null, content jsonb not null,
	occurred_on_utc timestamp not null, processed_on_utc timestamp null, error text null, retry_count integer not null default 0`

const workCoordinatorColumns = `message_id uuid primary key, correlation_id uuid not null, causation_id uuid null,
	message_type varchar(500) not null, payload jsonb not null, topic varchar(255) not null, stream_key varchar(255) null,
	partition_number int not null, metadata jsonb null, instance_id uuid null, lease_expiry timestamptz null,
	status varchar(50) not null default 'Stored' check (status in ('Stored','Published','Failed')), attempts int not null default 0,
	last_error text null, created_at timestamptz not null default now(), published_at timestamptz null`

const dispatcherColumns = `id uuid primary key, occurred_at_utc timestamp(3) not null, aggregate_id uuid null,
	message_type varchar(256) not null, assembly_name varchar(512) not null, payload text not null, correlation_id uuid null,
	tenant_id varchar(64) null, sent boolean not null default false, sent_at_utc timestamp(3) null, attempt_count int not null default 0,
	last_attempt_at_utc timestamp(3) null, last_error varchar(2048) null, lock_id uuid null, locked_at_utc timestamp(3) null`

// legacyArgs are the relay flags common to the three tables: the table,
// slot and publication of o, without the default column mapping.
func legacyArgs(o *outbox, extra ...string) []string {
	return append([]string{
		"--postgres-url", pg.URL, "--kafka-brokers", broker.Brokers,
		"--table", "public." + o.name, "--publication", o.name, "--slot", o.name,
		"--status-interval", "1s", "--http-addr", "127.0.0.1:0", "--dlq-topic", o.name + ".dlq",
		"--column-aggregate-type", "", "--column-headers", "", "--message-prefix", "",
	}, extra...)
}

// expectedEvent is what the relay must publish for one row.
type expectedEvent struct {
	topic, value string
	key          *string // nil: a null key
	time         time.Time
	headers      map[string]string
}

// checkPublished consumes want's events and checks each against the row.
func checkPublished(t *testing.T, topics []string, want map[string]expectedEvent, rolledBack []string) []kafka.Message {
	t.Helper()
	msgs := consume(t, topics, len(want), time.Minute)
	first, dups := byID(t, msgs)
	for id, w := range want {
		m, ok := first[id]
		if !ok {
			t.Errorf("row %s never arrived", id)
			continue
		}
		switch {
		case m.Topic != w.topic:
			t.Errorf("row %s on topic %s, want %s", id, m.Topic, w.topic)
		case string(m.Value) != w.value:
			t.Errorf("row %s value %q, want the column's text %q", id, m.Value, w.value)
		case w.key == nil && m.Key != nil:
			t.Errorf("row %s key %q, want a null key", id, m.Key)
		case w.key != nil && string(m.Key) != *w.key:
			t.Errorf("row %s key %q, want %q", id, m.Key, *w.key)
		case !w.time.IsZero() && !m.Time.Equal(w.time.Truncate(time.Millisecond)):
			t.Errorf("row %s timestamp %s, want the row's %s read as UTC", id, m.Time.UTC(), w.time)
		}
		for k, v := range w.headers {
			if got, ok := testkit.Header(m, k); !ok || got != v {
				t.Errorf("row %s header %s = %q (present %v), want %q", id, k, got, ok, v)
			}
		}
	}
	for _, id := range rolledBack {
		if _, ok := first[id]; ok {
			t.Errorf("rolled-back row %s arrived", id)
		}
	}
	t.Logf("%d rows arrived as mapped, %d rolled back absent, %d duplicates", len(want), len(rolledBack), dups)
	return msgs
}

// waitRows polls a count query until it returns want.
func waitRows(t *testing.T, o *outbox, query string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := o.db.QueryRow(context.Background(), query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d rows after 30s, want %d", what, n, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptr(s string) *string { return &s }

// TestEFCoreOutbox: no aggregate columns at all (null keys), .NET type names
// as topics, a timestamp without time zone, marked processed once
// published, and a dead letter's error kept in the error column.
func TestEFCoreOutbox(t *testing.T) {
	o := newOutbox(t, "efcore", efCoreColumns)
	startRelay(t, legacyArgs(o, "--column-aggregate-id", "", "--column-event-type", "type", "--column-payload", "content",
		"--column-timestamp", "occurred_on_utc", "--topic", o.name+".{type}", "--max-message-bytes", "4096",
		"--cleanup", "mark", "--mark", "processed_on_utc=now()", "--mark-dead", "error=reason")...)
	ctx := context.Background()
	types := []string{"Shop.Domain.Orders.OrderPlacedDomainEvent", "Shop.Domain.Orders.OrderShippedDomainEvent"}
	want := map[string]expectedEvent{}
	var rolledBack []string
	occurred := time.Date(2026, 11, 23, 9, 30, 15, 123456000, time.UTC)
	for i := range 40 {
		id, typ := uuid.NewString(), types[i%2]
		content := fmt.Sprintf(`{"OrderId": "o-%d", "Total": %d.5}`, i, i)
		tx, err := o.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// As EF Core's SaveChanges writes it: processed_on_utc and error NULL.
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, type, content, occurred_on_utc) VALUES ($1, $2, $3, $4)`, o.name),
			id, typ, content, occurred.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			_ = tx.Rollback(ctx)
			rolledBack = append(rolledBack, id)
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var stored string
		_ = o.db.QueryRow(ctx, fmt.Sprintf(`SELECT content::text FROM %s WHERE id = $1`, o.name), id).Scan(&stored)
		want[id] = expectedEvent{topic: o.name + "." + typ, value: stored, time: occurred.Add(time.Duration(i) * time.Second),
			headers: map[string]string{"event_type": typ, "id": id}}
	}
	tooBig := uuid.NewString()
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, type, content, occurred_on_utc) VALUES ($1, $2, $3, now())`, o.name),
		tooBig, types[0], fmt.Sprintf(`{"blob": "%s"}`, strings.Repeat("x", 8000))); err != nil {
		t.Fatal(err)
	}
	msgs := checkPublished(t, []string{o.name + "." + types[0], o.name + "." + types[1]}, want, rolledBack)
	for _, m := range msgs {
		if _, ok := testkit.Header(m, "aggregate_type"); ok {
			t.Fatalf("an aggregate_type header on a table without the column")
		}
	}
	waitRows(t, o, fmt.Sprintf(`SELECT count(*) FROM %s WHERE processed_on_utc IS NOT NULL`, o.name), len(want), "rows marked processed")
	waitRows(t, o, fmt.Sprintf(`SELECT count(*) FROM %s WHERE id = '%s' AND error = 'message_too_large' AND processed_on_utc IS NULL`, o.name, tooBig), 1,
		"the oversized row marked with its dead letter's reason")
}

// TestDispatcherOutbox: a nullable uuid key, a text payload, and
// assembly-qualified type names rewritten into topic names.
func TestDispatcherOutbox(t *testing.T) {
	o := newOutbox(t, "dispatch", dispatcherColumns)
	startRelay(t, legacyArgs(o, "--column-aggregate-id", "aggregate_id", "--null-key", "allow", "--column-event-type", "message_type",
		"--column-timestamp", "occurred_at_utc", "--header-column", "correlation_id", "--header-column", "tenant_id",
		"--topic", "{message_type}, {assembly_name}", "--topic-regex", `Company\.Sales\.Contracts\.(\w+), Company\.Sales\.Contracts`,
		"--topic-replacement", o.name+".sales.$1",
		"--cleanup", "mark", "--mark", "sent=true", "--mark", "sent_at_utc=now()", "--mark-dead", "last_error=reason")...)
	ctx := context.Background()
	want := map[string]expectedEvent{}
	var rolledBack []string
	for i := range 30 {
		id := uuid.NewString()
		typ := []string{"OrderPaidIntegrationEvent", "OrderRefundedIntegrationEvent"}[i%2]
		var agg, corr, tenant any
		var key *string
		if i%3 != 0 {
			a := uuid.NewString()
			agg, key = a, ptr(a)
		}
		if i%2 == 0 {
			corr, tenant = uuid.NewString(), "acme"
		}
		at := time.Date(2026, 11, 23, 8, 0, i, 250_000_000, time.UTC)
		payload := fmt.Sprintf(`<order id="%d"/>`, i)
		tx, err := o.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, occurred_at_utc, aggregate_id, message_type, assembly_name, payload, correlation_id, tenant_id)
			VALUES ($1, $2, $3, $4, 'Company.Sales.Contracts', $5, $6, $7)`, o.name), id, at, agg, "Company.Sales.Contracts."+typ, payload, corr, tenant); err != nil {
			t.Fatal(err)
		}
		if i%8 == 5 {
			_ = tx.Rollback(ctx)
			rolledBack = append(rolledBack, id)
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		h := map[string]string{"event_type": "Company.Sales.Contracts." + typ}
		if corr != nil {
			h["correlation_id"], h["tenant_id"] = corr.(string), "acme"
		}
		want[id] = expectedEvent{topic: o.name + ".sales." + typ, value: payload, key: key, time: at, headers: h}
	}
	// A type from another assembly matches no rewrite: "X, Y" is no topic name.
	stray := uuid.NewString()
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, occurred_at_utc, message_type, assembly_name, payload)
		VALUES ($1, now(), 'Company.Billing.Contracts.InvoiceSent', 'Company.Billing.Contracts', 'x')`, o.name), stray); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{o.name + ".sales.OrderPaidIntegrationEvent", o.name + ".sales.OrderRefundedIntegrationEvent"}, want, rolledBack)
	waitRows(t, o, fmt.Sprintf(`SELECT count(*) FROM %s WHERE sent AND sent_at_utc IS NOT NULL`, o.name), len(want), "rows marked sent")
	waitRows(t, o, fmt.Sprintf(`SELECT count(*) FROM %s WHERE id = '%s' AND NOT sent AND last_error = 'invalid_topic'`, o.name, stray), 1,
		"the unroutable row marked with its dead letter's reason")
}

// TestCaseSensitiveNames: EF Core's default naming, PascalCase, quoted:
// flags name the catalog's exact names, never folded.
func TestCaseSensitiveNames(t *testing.T) {
	o := newOutbox(t, "efpascal", "x int") // for its slot, publication and cleanup
	ctx := context.Background()
	table := "OutboxMessages_" + strings.TrimPrefix(o.name, "efpascal_")
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`CREATE TABLE %q ("Id" uuid PRIMARY KEY, "Type" text NOT NULL, "Content" jsonb NOT NULL,
		"OccurredOnUtc" timestamp NOT NULL, "ProcessedOnUtc" timestamp NULL)`, table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = o.db.Exec(context.Background(), fmt.Sprintf(`DROP TABLE IF EXISTS %q`, table)) })
	args := legacyArgs(o, "--table", "public."+table, "--column-id", "Id", "--column-aggregate-id", "", "--column-event-type", "Type",
		"--column-payload", "Content", "--column-timestamp", "OccurredOnUtc", "--topic", o.name+".{Type}",
		"--cleanup", "mark", "--mark", "ProcessedOnUtc=now()")
	startRelay(t, args...)
	id := uuid.NewString()
	if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %q ("Id", "Type", "Content", "OccurredOnUtc") VALUES ($1, 'Placed', '{"a": 1}', now())`, table), id); err != nil {
		t.Fatal(err)
	}
	msgs := consume(t, []string{o.name + ".Placed"}, 1, time.Minute)
	if got, _ := testkit.Header(msgs[0], "id"); got != id || string(msgs[0].Value) != `{"a": 1}` {
		t.Errorf("got id %q value %q", got, msgs[0].Value)
	}
	waitRows(t, o, fmt.Sprintf(`SELECT count(*) FROM %q WHERE "ProcessedOnUtc" IS NOT NULL`, table), 1, "the row marked processed")
}
