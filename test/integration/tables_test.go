package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestSeveralTables relays two outbox tables through one publication and one
// slot: one mapped by the flags, one with Debezium's column names, a header
// column and a topic of its own from a --config file.
func TestSeveralTables(t *testing.T) {
	a := newOutbox(t, "multi_a", defaultColumns)
	b := newOutbox(t, "multi_b", `
	id uuid primary key,
	aggregatetype text not null,
	aggregateid text not null,
	type text not null,
	payload jsonb not null,
	tenant text`)
	ctx := context.Background()
	cfg := filepath.Join(t.TempDir(), "outbox-cdc.yaml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
tables:
  - table: public.%s
    topic: %s.{event_type}
    columns:
      aggregate_type: aggregatetype
      aggregate_id: aggregateid
      event_type: type
    header_columns: ["tenant:tenant_id"]
`, b.name, b.name)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	args := replaceFlag(a.args("--config", cfg), "--table", "public."+a.name+",public."+b.name)

	code, out := runOnce(t, "setup", "--print", "--table", "public."+a.name+",public."+b.name, "--publication", a.name, "--slot", a.name)
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`CREATE PUBLICATION "%s" FOR TABLE "public"."%s", "public"."%s"`, a.name, a.name, b.name)) {
		t.Errorf("setup --print for two tables: exit %d\n%s", code, out)
	}

	r := startRelay(t, args...)
	var pubTables int
	_ = a.db.QueryRow(ctx, `SELECT count(*) FROM pg_publication_tables WHERE pubname = $1`, a.name).Scan(&pubTables)
	if pubTables != 2 {
		t.Errorf("publication %s carries %d tables, want 2", a.name, pubTables)
	}

	wa, counters := newWritten(), map[string]int{}
	insertRows(t, a, wa, makeRows(300, 10, "order", counters), 10)
	for i := range 200 {
		if _, err := b.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregatetype, aggregateid, type, payload, tenant)
			VALUES (gen_random_uuid(), 'invoice', $1, $2, $3, 'acme')`, b.name), fmt.Sprintf("inv-%d", i%7), []string{"InvoiceIssued", "InvoicePaid"}[i%2], fmt.Sprintf(`{"n": %d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	checkDelivered(t, a, wa, consume(t, []string{a.name + ".order"}, 300, time.Minute))
	msgs := consume(t, []string{b.name + ".InvoiceIssued", b.name + ".InvoicePaid"}, 200, time.Minute)
	for _, m := range msgs {
		typ, _ := testkit.Header(m, "event_type")
		tenant, _ := testkit.Header(m, "tenant_id")
		if m.Topic != b.name+"."+typ || tenant != "acme" || !strings.HasPrefix(string(m.Key), "inv-") {
			t.Fatalf("table b's event on %s, event_type %q, tenant_id %q, key %q", m.Topic, typ, tenant, m.Key)
		}
	}
	waitConfirmed(t, a, a.CurrentLSN(t), 30*time.Second)
	t.Logf("two tables, one publication and one slot: 300 events on %s.order, 200 on %s.{event_type} with the tenant header", a.name, b.name)
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
}
