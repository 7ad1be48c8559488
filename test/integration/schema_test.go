package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestSchemaChanges alters the outbox table under a running relay. Added
// columns and type changes are followed; a renamed key column makes rows
// unmappable (dead-lettered, never dropped) until it is renamed back; a
// table dropped and recreated has left the publication, and the relay stops
// with exit 1 and the commands to recover rather than relay nothing.
func TestSchemaChanges(t *testing.T) {
	o := newOutbox(t, "schema", defaultColumns)
	dlq := o.name + ".dlq"
	r := startRelay(t, o.args("--dlq-topic", dlq, "--heartbeat-interval", "1s")...)
	insert := func(n int) string {
		return o.insertOne(t, uuid.NewString(), "order", "o-1", "created", fmt.Sprintf(`{"n": %d}`, n), nil)
	}
	ids := []string{insert(0)}
	o.exec(t, `ALTER TABLE $T ADD COLUMN tenant text DEFAULT 'acme'`)
	ids = append(ids, insert(1))
	o.exec(t, `ALTER TABLE $T ALTER COLUMN payload TYPE text USING payload::text`)
	ids = append(ids, o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 2}`, nil))
	o.exec(t, `ALTER TABLE $T RENAME COLUMN aggregate_id TO agg_id`)
	if _, err := o.db.Exec(context.Background(), fmt.Sprintf(
		`INSERT INTO %s (id, aggregate_type, agg_id, event_type, payload) VALUES ($1, 'order', 'o-1', 'created', '{"n": "renamed"}')`, o.name), uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	o.exec(t, `ALTER TABLE $T RENAME COLUMN agg_id TO aggregate_id`)
	ids = append(ids, insert(3))

	msgs := consume(t, []string{o.name + ".order"}, len(ids), time.Minute)
	var ns []string
	for _, m := range sortedByOffset(msgs) {
		ns = append(ns, string(m.Value))
	}
	if got := strings.Join(ns, " "); got != `{"n": 0} {"n": 1} {"n": 2} {"n": 3}` {
		t.Errorf("o-1's values in partition order: %s", got)
	}
	dead := consume(t, []string{dlq}, 1, time.Minute)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the one row written while aggregate_id was renamed", len(dead))
	}
	if got, _ := testkit.Header(dead[0], "outbox_cdc.reason"); got != "unmapped_table" {
		t.Errorf("renamed column: dead-letter reason %q, want unmapped_table", got)
	}
	if got, _ := testkit.Header(dead[0], "outbox_cdc.column.agg_id"); got != "o-1" {
		t.Errorf("renamed column: the dead letter's agg_id column header is %q, want o-1", got)
	}

	o.exec(t, `DROP TABLE $T`, "CREATE TABLE $T ("+defaultColumns+")")
	insert(4)
	log := r.waitFailure(t, 30*time.Second, "its table was dropped and recreated out of the publication")
	if want := "ALTER PUBLICATION"; !strings.Contains(log, want) {
		t.Errorf("the exit message does not say how to recover (%q):\n%s", want, testkit.Tail(log, 3))
	}
}

// TestSlotDropped: a slot dropped while the relay streams is never silently
// recreated: the relay exits 1 saying so.
func TestSlotDropped(t *testing.T) {
	o := newOutbox(t, "slotdrop", defaultColumns)
	r := startRelay(t, o.args()...)
	o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{}`, nil)
	consume(t, []string{o.name + ".order"}, 1, time.Minute)
	// A slot in use cannot be dropped: end its walsender, then drop it
	// before the relay reconnects (its backoff is at least half a second).
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := o.db.Exec(context.Background(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active`, o.name)
		if err == nil {
			_, err = o.db.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, o.name)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drop slot: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	log := r.waitFailure(t, 60*time.Second, "its slot was dropped")
	var exists bool
	_ = o.db.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, o.name).Scan(&exists)
	if exists {
		t.Errorf("the relay recreated the dropped slot")
	}
	if !strings.Contains(log, "was dropped") {
		t.Errorf("the exit message does not say the slot was dropped:\n%s", testkit.Tail(log, 3))
	}
}
