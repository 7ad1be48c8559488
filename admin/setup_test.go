package admin

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// config returns relay.Default with tables and with change applied.
func config(change func(*relay.Config), tables ...string) relay.Config {
	cfg := relay.Default()
	if len(tables) > 0 {
		cfg.Tables = nil
		for _, name := range tables {
			cfg.Tables = append(cfg.Tables, cfg.Table(name))
		}
	}
	if change != nil {
		change(&cfg)
	}
	return cfg
}

// backfillTable is public.outbox's progress table, as backfill.SetupSQL
// creates it for role "relay".
var backfillTable = backfill.SetupSQL("public", "relay")

// TestPlanForAFreshDatabase is `setup --print` without --postgres-url: every
// statement, in the order it must run, the privileges each cleanup and a
// backfill need, and the topics to create. The expected statements are
// what setup --print printed before package admin existed.
func TestPlanForAFreshDatabase(t *testing.T) {
	const (
		pub       = `CREATE PUBLICATION "outbox_cdc" FOR TABLE "public"."outbox" WITH (publish = 'insert');`
		slot      = `SELECT pg_create_logical_replication_slot('outbox_cdc', 'pgoutput');`
		roleNote  = `-- the role, if it does not exist yet: CREATE ROLE "relay" WITH LOGIN REPLICATION PASSWORD '…';`
		alterRole = `ALTER ROLE "relay" WITH LOGIN REPLICATION;`
		usage     = `GRANT USAGE ON SCHEMA "public" TO "relay";`
		emit      = `GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO "relay";`
	)
	// setup records the slot it creates (TestSetupRecordsTheSlotItCreates).
	healTable, recorded := backfill.HealTableSQL("public")+";", backfill.RecordSlotSQL("public", "outbox_cdc")
	dlq := Topic{Name: "outbox.dlq"}
	tests := []struct {
		name   string
		cfg    relay.Config
		role   string
		want   []string
		topics []Topic
	}{
		{name: "no role", cfg: config(nil), want: []string{pub, slot, healTable, recorded}},
		{name: "no role, failover on", cfg: config(func(c *relay.Config) { c.Slot.Failover = "on" }), want: []string{pub, slot, healTable, recorded}},
		{name: "role, no cleanup: no privilege on the table", cfg: config(nil), role: "relay",
			want: []string{pub, roleNote, alterRole, usage, emit, slot, healTable, recorded}},
		{name: "two schemas, mark", role: "relay",
			cfg: config(func(c *relay.Config) { c.Cleanup = cleanup.Mark }, "public.outbox", "other.t2"),
			want: []string{`CREATE PUBLICATION "outbox_cdc" FOR TABLE "public"."outbox", "other"."t2" WITH (publish = 'insert');`,
				roleNote, alterRole, usage, `GRANT USAGE ON SCHEMA "other" TO "relay";`, emit,
				`GRANT SELECT, UPDATE ON "public"."outbox", "other"."t2" TO "relay";`, slot, healTable, recorded}},
		{name: "backfill and delete: no slot, the progress table, topics", role: "relay",
			cfg: config(func(c *relay.Config) {
				c.Cleanup, c.Kafka.Brokers = cleanup.DeleteAfterPublish, []string{"127.0.0.1:1"}
				c.Tables[0].Backfill.Where, c.Tables[0].Route.Topic = "true", "fixed.topic"
			}),
			want:   append([]string{pub, roleNote, alterRole, usage, emit, `GRANT SELECT, DELETE ON "public"."outbox" TO "relay";`}, backfillTable...),
			topics: []Topic{dlq, {Name: "fixed.topic"}}},
		{name: "a row filter, rendered from its tokens", cfg: config(func(c *relay.Config) { c.Tables[0].Where = "target_broker = 'partner' -- the partner's" }),
			want: []string{`CREATE PUBLICATION "outbox_cdc" FOR TABLE "public"."outbox" WHERE (target_broker = 'partner') WITH (publish = 'insert');`, slot, healTable, recorded}},
		{name: "backfill without a role: no progress table", cfg: config(func(c *relay.Config) { c.Tables[0].Backfill.Where = "true" }),
			want: []string{pub}},
		{name: "a template names no topic; no dead-letter topic", want: []string{pub, slot, healTable, recorded},
			cfg: config(func(c *relay.Config) {
				c.Kafka.Brokers, c.Topics.OnInvalid, c.Tables[0].Route.Topic = []string{"127.0.0.1:1"}, relay.OnInvalidFail, "a.{aggregate_type}"
			})},
		{name: "topic specs", want: []string{pub, slot, healTable, recorded},
			cfg: config(func(c *relay.Config) {
				c.Kafka.Brokers = []string{"127.0.0.1:1"}
				c.Defaults.Route.Spec = sink.TopicSpec{Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "1000"}}
				c.Tables[0].Route.Topic, c.Tables[0].Route.Spec = "fixed", sink.TopicSpec{Partitions: 6}
			}),
			topics: []Topic{{"outbox.dlq", sink.TopicSpec{Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "1000"}}},
				{"fixed", sink.TopicSpec{Partitions: 6}}}},
		{name: "topics not created", want: []string{pub, slot, healTable, recorded},
			cfg: config(func(c *relay.Config) {
				c.Kafka.Brokers, c.Topics.Create, c.Tables[0].Route.Topic = []string{"127.0.0.1:1"}, false, "fixed"
			})},
		{name: "no brokers: no topics", want: []string{pub, slot, healTable, recorded}, cfg: config(func(c *relay.Config) { c.Tables[0].Route.Topic = "fixed" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Plan(context.Background(), tt.cfg, tt.role, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Statements, tt.want) {
				t.Errorf("statements:\n%s\nwant:\n%s", strings.Join(p.Statements, "\n"), strings.Join(tt.want, "\n"))
			}
			if len(p.Topics) != len(tt.topics) {
				t.Fatalf("topics %v, want %v", p.Topics, tt.topics)
			}
			for i := range p.Topics {
				if p.Topics[i].Name != tt.topics[i].Name || p.Topics[i].Spec.String() != tt.topics[i].Spec.String() {
					t.Errorf("topic %d: %v, want %v", i, p.Topics[i], tt.topics[i])
				}
			}
			if p.Tables != tt.cfg.TableNames() || p.Publication != "outbox_cdc" || p.Slot != "outbox_cdc" {
				t.Errorf("plan names %q, %q, %q", p.Tables, p.Publication, p.Slot)
			}
		})
	}
}

// TestPrivileges: DELETE for delete-after-publish, UPDATE for mark, SELECT
// for a backfill, nothing to stream.
func TestPrivileges(t *testing.T) {
	tests := []struct {
		cleanup  cleanup.Policy
		backfill string
		want     []string
	}{
		{cleanup.None, "", nil},
		{cleanup.DeleteAfterPublish, "", []string{"DELETE"}},
		{cleanup.Mark, "", []string{"UPDATE"}},
		{cleanup.None, "id > 0", []string{"SELECT"}},
		{cleanup.Mark, "id > 0", []string{"UPDATE", "SELECT"}},
	}
	for _, tt := range tests {
		cfg := config(func(c *relay.Config) { c.Cleanup = tt.cleanup }, "public.a", "public.b")
		cfg.Tables[1].Backfill.Where = tt.backfill
		if got := Privileges(cfg); !slices.Equal(got, tt.want) {
			t.Errorf("cleanup %s, backfill %q: %v, want %v", tt.cleanup, tt.backfill, got, tt.want)
		}
	}
}

// TestApplyWithoutStatements: a plan with nothing to run or create does
// nothing, and needs no connection; statements without one are an error
// that names the flag.
func TestApplyWithoutStatements(t *testing.T) {
	done, err := Apply(context.Background(), config(nil), SetupPlan{Statements: []string{"-- a comment"}}, nil)
	if err != nil || len(done.Statements) != 0 || len(done.Topics) != 0 {
		t.Errorf("Apply of a comment: %+v, %v", done, err)
	}
	_, err = Apply(context.Background(), config(nil), SetupPlan{Statements: []string{"SELECT 1;"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "--postgres-url") {
		t.Errorf("Apply without a connection: %v", err)
	}
}

// TestSetupRecordsTheSlotItCreates: a slot setup creates is recorded as
// known here (backfill.HealTable), right after it, as run records its own:
// a heal then recognizes it missing later (a failover, a restore) instead
// of taking it for a first start. A slot setup leaves to run (a backfill)
// is run's to record.
func TestSetupRecordsTheSlotItCreates(t *testing.T) {
	record := `INSERT INTO "public"."outbox_cdc_heal" (slot) VALUES ('outbox_cdc') ON CONFLICT (slot) DO NOTHING;`
	for _, tt := range []struct {
		name    string
		cfg     relay.Config
		role    string
		records bool
	}{
		{"the slot created, no role", config(nil), "", true},
		{"the slot created, a role, heal", config(func(c *relay.Config) {
			c.Cleanup, c.OnSlotLost = cleanup.DeleteAfterPublish, relay.SlotLostHeal
		}), "relay", true},
		{"the slot left to run's backfill", config(func(c *relay.Config) { c.Tables[0].Backfill.Where = "true" }), "relay", false},
		{"messages only: no table to record in", config(func(c *relay.Config) { c.Tables = nil }), "", false},
	} {
		p, err := Plan(context.Background(), tt.cfg, tt.role, nil)
		if err != nil {
			t.Fatal(err)
		}
		creates := slices.IndexFunc(p.Statements, func(s string) bool { return strings.HasPrefix(s, "SELECT pg_create_logical_replication_slot(") })
		at := slices.Index(p.Statements, record)
		switch {
		case tt.records && (at < 0 || creates < 0 || at < creates):
			t.Errorf("%s: the slot is not recorded after it is created:\n%s", tt.name, strings.Join(p.Statements, "\n"))
		case !tt.records && at >= 0:
			t.Errorf("%s: a slot setup does not create is recorded:\n%s", tt.name, strings.Join(p.Statements, "\n"))
		}
		if tt.records && slices.IndexFunc(p.Statements, func(s string) bool {
			return strings.Contains(s, "CREATE TABLE IF NOT EXISTS \"public\".\"outbox_cdc_heal\"")
		}) < 0 {
			t.Errorf("%s: the heal table is not created before the record:\n%s", tt.name, strings.Join(p.Statements, "\n"))
		}
	}
}
