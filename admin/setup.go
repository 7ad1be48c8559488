package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// SetupPlan is what setup creates and grants: SQL statements, in the order
// they must run (comments begin with "--"), and Kafka topics.
type SetupPlan struct {
	Tables      string   `json:"tables"` // schema.table, comma-separated
	Publication string   `json:"publication"`
	Slot        string   `json:"slot"`
	Statements  []string `json:"statements"`
	Topics      []Topic  `json:"topics,omitempty"`
}

// Topic is a topic setup creates unless it exists, and how.
type Topic struct {
	Name string         `json:"name"`
	Spec sink.TopicSpec `json:"spec"`
}

// Privileges are what role needs on the outbox tables beyond streaming,
// which needs none: DELETE to delete published rows, UPDATE to mark them,
// SELECT to backfill them.
func Privileges(cfg relay.Config) []string {
	var out []string
	switch cfg.Cleanup {
	case cleanup.DeleteAfterPublish:
		out = append(out, "DELETE")
	case cleanup.Mark:
		out = append(out, "UPDATE")
	}
	if backfilling(cfg) || cfg.OnSlotLost == relay.SlotLostHeal {
		out = append(out, "SELECT") // a heal reads the rows as a backfill does
	}
	return out
}

// backfilling reports whether some table has a backfill.
func backfilling(cfg relay.Config) bool {
	return slices.ContainsFunc(cfg.Tables, func(t relay.Table) bool { return t.Backfill.Where != "" })
}

// Plan returns what makes Postgres and Kafka ready for `outbox-cdc run`
// with cfg, as role (empty: no grants). With conn, what is in place there
// is left out; with a nil conn, the plan is for a fresh database. With a
// backfill and a role, the backfill's progress table and its grants too;
// the slot is then left to run, which creates it exporting the snapshot
// the backfill reads.
func Plan(ctx context.Context, cfg relay.Config, role string, conn *pgx.Conn) (SetupPlan, error) {
	p := SetupPlan{Tables: cfg.TableNames(), Publication: cfg.Slot.Publication, Slot: cfg.Slot.Name, Topics: append(setupTopics(cfg), setupCheckpointTopic(cfg)...)}
	stmts, err := slot.SetupSQL(ctx, conn, cfg.Target(), role, Privileges(cfg), backfilling(cfg))
	if err != nil {
		return p, err
	}
	heals := cfg.OnSlotLost == relay.SlotLostHeal
	if (backfilling(cfg) || heals) && role != "" && len(cfg.Tables) > 0 {
		stmts = append(stmts, backfill.SetupSQL(cfg.Tables[0].Schema, role)...)
	}
	if heals && role != "" && len(cfg.Tables) > 0 {
		stmts = append(stmts, backfill.HealSetupSQL(cfg.Tables[0].Schema, role)...)
	}
	if len(cfg.Tables) > 0 && slices.ContainsFunc(stmts, createsSlot) {
		// Recorded as run records a slot it makes: a heal recognizes it
		// missing later (a failover, a restore) rather than taking it for
		// a first start.
		if !heals || role == "" {
			stmts = append(stmts, backfill.HealTableSQL(cfg.Tables[0].Schema)+";")
		}
		stmts = append(stmts, backfill.RecordSlotSQL(cfg.Tables[0].Schema, cfg.Slot.Name))
	}
	p.Statements = stmts
	return p, nil
}

// createsSlot says whether stmt, of slot.SetupSQL's, creates the slot.
func createsSlot(stmt string) bool {
	return strings.HasPrefix(stmt, "SELECT pg_create_logical_replication_slot(")
}

// setupTopics are the topics setup creates when cfg creates missing
// topics: the dead-letter topic, and each table's fixed topic (a template
// with fields names topics that only rows know).
func setupTopics(cfg relay.Config) []Topic {
	if len(cfg.Kafka.Brokers) == 0 || !cfg.Topics.Create {
		return nil
	}
	var out []Topic
	if dlq := deadLetterTopic(cfg); dlq != "" {
		out = append(out, Topic{dlq, cfg.Defaults.Route.Spec})
	}
	for _, t := range cfg.Tables {
		tp, err := sink.ParseTopic(t.Route.Topic)
		if err != nil {
			continue // Validate refused it; check says so
		}
		if name, ok := tp.Fixed(); ok && !slices.ContainsFunc(out, func(s Topic) bool { return s.Name == name }) {
			out = append(out, Topic{name, t.Route.Spec})
		}
	}
	return out
}

// Applied is what Apply did, in order: up to the failure, when it failed.
type Applied struct {
	Topics []TopicResult `json:"topics,omitempty"`
	// Statements are the statements run; comments are not.
	Statements []string `json:"statements,omitempty"`
}

// TopicResult is a topic Apply made sure of.
type TopicResult struct {
	Topic
	Created bool `json:"created"` // false: it existed
}

// Apply carries out p: it creates the topics that do not exist, then runs
// the statements on conn, one by one (each GRANT is idempotent, and the
// slot, created last, cannot share a transaction with the rest).
func Apply(ctx context.Context, cfg relay.Config, p SetupPlan, conn *pgx.Conn) (Applied, error) {
	var done Applied
	if len(p.Topics) > 0 {
		sec, err := cfg.Security()
		if err != nil {
			return done, err
		}
		for _, t := range p.Topics {
			created, err := ensureTopic(ctx, cfg, sec, t)
			if err != nil {
				return done, err
			}
			done.Topics = append(done.Topics, TopicResult{t, created})
		}
	}
	pinned := false
	for _, s := range p.Statements {
		if strings.HasPrefix(s, "--") {
			continue
		}
		if conn == nil {
			return done, errors.New("no connection to postgres to run the statements on: set --postgres-url")
		}
		if !pinned { // a --where's strings read as Parse read them
			if err := execOne(ctx, conn, "SET standard_conforming_strings = on"); err != nil {
				return done, fmt.Errorf("set standard_conforming_strings: %w", err)
			}
			pinned = true
		}
		if err := execOne(ctx, conn, s); err != nil {
			return done, fmt.Errorf("%s: %w", s, err)
		}
		done.Statements = append(done.Statements, s)
	}
	return done, nil
}

// execOne runs sql on the extended protocol, which runs one statement
// alone: a statement holding a --where row filter cannot carry a second
// one (pgx's Exec without arguments uses the simple protocol, which runs
// them all).
func execOne(ctx context.Context, conn *pgx.Conn, sql string) error {
	_, err := conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Close()
	return err
}
