package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestSlotHealedAlertOnPrometheus runs deploy/prometheus/alerts.yml,
// unchanged, in a real Prometheus scraping a relay with --on-slot-lost
// heal: quiet while it streams, OutboxCDCSlotHealed fires once its slot
// is dropped by hand under it and it has healed.
func TestSlotHealedAlertOnPrometheus(t *testing.T) {
	slowFault(t) // make test-faults (and .ci/run) runs it: make test stays under 10 minutes
	o := newOutbox(t, "healalert", defaultColumns)
	r := startRelay(t, o.args("--cleanup", "delete-after-publish", "--on-slot-lost", "heal")...)
	rules, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	prom, err := testkit.StartPrometheus(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: outbox-cdc
    static_configs:
      - targets: [%q]
`, r.HTTPAddr(t)), map[string]string{"alerts.yml": string(rules)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", testkit.Tail(prom.Log(), 20))
		}
		_ = prom.Stop()
	})

	w := &trickle{db: o.db, table: o.name, next: map[string]int{}}
	w.writeN(t, 20)
	consumeN(t, o.name+".order", 20, time.Minute)
	waitAlerts(t, prom, 30*time.Second, "the relay scraped", func(_ map[string]string, up int) bool { return up == 1 })
	time.Sleep(3 * time.Second)
	if s, ok := alerts(t, prom)["OutboxCDCSlotHealed"]; ok {
		t.Fatalf("streaming, no heal, yet OutboxCDCSlotHealed is %s", s)
	}

	// The slot dropped under the streaming relay: its walsender ended, and
	// the slot dropped before the relay takes it again (retried until it is).
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx := context.Background()
		_, _ = o.db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, o.name)
		_, err := o.db.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, o.name)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("could not drop slot %q under the relay: %v", o.name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.writeN(t, 5)
	dropped := time.Now()
	waitAlerts(t, prom, time.Minute, "OutboxCDCSlotHealed fires once the relay healed its dropped slot", func(a map[string]string, _ int) bool {
		return a["OutboxCDCSlotHealed"] == "firing"
	})
	t.Logf("OutboxCDCSlotHealed firing %s after the slot was dropped", time.Since(dropped).Round(time.Millisecond))
}
