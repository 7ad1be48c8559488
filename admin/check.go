package admin

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// CheckReport is check's answer: what was checked, and how each item came
// out, in the order an operator fixes them (Postgres, then Kafka).
type CheckReport struct {
	Postgres string   `json:"postgres"` // user@host:port/database, no password
	Brokers  []string `json:"kafka_brokers"`
	Tables   string   `json:"tables"` // schema.table, comma-separated
	// Offline says the configuration was validated alone, no server asked:
	// Items then holds only what needs none (the contracts').
	Offline bool             `json:"offline,omitempty"`
	Items   []checklist.Item `json:"items"`
}

// Failed counts the items that failed: run will not work until each is
// fixed.
func (r CheckReport) Failed() int {
	n := 0
	for _, it := range r.Items {
		if it.Status == checklist.Fail {
			n++
		}
	}
	return n
}

// CheckOption changes what Check looks at.
type CheckOption func(*checkOptions)

type checkOptions struct {
	offline   bool
	transport *[3]checklist.Item // Postgres's, Kafka's, the schema registry's
}

// Offline, when on, makes Check validate the configuration alone and ask
// no server: a configuration can be checked where the servers are not
// reachable (a CI job, a laptop).
func Offline(on bool) CheckOption { return func(o *checkOptions) { o.offline = on } }

// Transport gives Check the items that say whether the connections to
// Postgres, to Kafka and to the schema registry can be read or altered on
// their way (the command line's configuration judges them, and run logs
// their warnings); Check lists each after its server's items, the
// registry's after the contracts' (a Skip item, no registry, is left out).
func Transport(postgres, kafka, registry checklist.Item) CheckOption {
	return func(o *checkOptions) { o.transport = &[3]checklist.Item{postgres, kafka, registry} }
}

// Check inspects, changing nothing, whether Postgres and Kafka are ready
// for `outbox-cdc run` with cfg: the server, the role, the tables, the
// publication and the slot (slot.Check), the server's version, the
// transports, what cleanup and each backfill need, the messages, the
// contracts (compiled), the brokers and topics (sink.Check), and with
// exactly-once what transactions need (checkExactly). The slot's items
// include its risk: what may invalidate it, and whether a lost slot heals
// with cfg's --on-slot-lost and --cleanup. Each item carries
// its fix. An error is the configuration's own, a setting to change, and
// no item is returned.
func Check(ctx context.Context, cfg relay.Config, opts ...CheckOption) (CheckReport, error) {
	var o checkOptions
	for _, opt := range opts {
		opt(&o)
	}
	r := CheckReport{Postgres: cfg.PostgresTarget(), Brokers: cfg.Kafka.Brokers, Tables: cfg.TableNames(), Offline: o.offline}
	if err := cfg.Validate(); err != nil {
		return r, err
	}
	sec, err := cfg.Security()
	if err != nil {
		return r, err
	}
	contracts := checkContracts(cfg) // needs no server
	if o.offline {
		r.Items = contracts
		return r, nil
	}
	items := slot.Check(ctx, cfg.PostgresURL, cfg.Target(), slot.CheckOptions{
		Cleanup: string(cfg.Cleanup), Heal: cfg.OnSlotLost == relay.SlotLostHeal,
	})
	if o.transport != nil {
		items = append(items, o.transport[0])
	}
	items = slices.Insert(items, min(1, len(items)), checkVersion(ctx, cfg.PostgresURL)...)
	items = append(items, checkCleanup(ctx, cfg)...)
	items = append(items, checkBackfill(ctx, cfg)...)
	templates := topicTemplates(cfg)
	if cfg.Messages.Prefix != "" {
		items = append(items, checklist.Item{Name: "messages", Status: checklist.OK,
			Detail: fmt.Sprintf("transactional logical decoding messages with prefix %q are events (outbox.Writer's Emit, sql/outbox_emit.sql), routed by %s",
				cfg.Messages.Prefix, cfg.Defaults.Route.Topic)})
	}
	items = append(items, contracts...)
	if o.transport != nil && o.transport[2].Status != checklist.Skip {
		items = append(items, o.transport[2])
	}
	items = append(items, checkRegistry(ctx, cfg)...)
	if o.transport != nil {
		items = append(items, o.transport[1])
	}
	r.Items = append(items, sink.Check(ctx, sink.CheckConfig{
		Brokers: cfg.Kafka.Brokers, Security: sec, Templates: templates, DeadLetterTopic: deadLetterTopic(cfg),
		AutoCreateTopics: cfg.Topics.AutoCreate, CreateTopics: cfg.Topics.Create, Spec: cfg.Defaults.Route.Spec,
	})...)
	r.Items = append(r.Items, checkExactly(ctx, cfg, sec)...)
	return r, nil
}

// topicTemplates are the topic templates events are routed by, each once:
// the tables' and, when messages are relayed, theirs.
func topicTemplates(cfg relay.Config) []string {
	var out []string
	for _, t := range cfg.Tables {
		if !slices.Contains(out, t.Route.Topic) {
			out = append(out, t.Route.Topic)
		}
	}
	if cfg.Messages.Prefix != "" && !slices.Contains(out, cfg.Defaults.Route.Topic) {
		out = append(out, cfg.Defaults.Route.Topic)
	}
	return out
}

// deadLetterTopic is where rows that cannot be published go; empty when
// they stop the relay instead.
func deadLetterTopic(cfg relay.Config) string {
	if cfg.Topics.OnInvalid != relay.OnInvalidDLQ {
		return ""
	}
	return cfg.Topics.DeadLetterTopic
}

// checkVersion is check's item for the server's version, right after
// "postgres reachable": one outbox-cdc can stream from. Nothing when the
// server cannot be reached, which the first item says.
func checkVersion(ctx context.Context, url string) []checklist.Item {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil
	}
	defer conn.Close(context.Background())
	const name = "postgres version"
	srv, err := slot.ReadServer(ctx, conn)
	if err != nil {
		return []checklist.Item{{Name: name, Status: checklist.Fail, Detail: "could not read: " + checklist.OneLine(err)}}
	}
	if why := srv.Unsupported(); why != "" {
		return []checklist.Item{{Name: name, Status: checklist.Fail, Detail: why,
			Fix: fmt.Sprintf("upgrade to PostgreSQL %d or newer", slot.MinServerVersion/10000)}}
	}
	return []checklist.Item{{Name: name, Status: checklist.OK, Detail: fmt.Sprintf("%d, supported (%d and newer)", srv.Major(), slot.MinServerVersion/10000)}}
}

// checkCleanup is the cleanup item when rows are deleted or marked: what
// cleanup.New checks at start (a unique id column, the privileges, columns
// the marks fit).
func checkCleanup(ctx context.Context, cfg relay.Config) []checklist.Item {
	if cfg.Cleanup == cleanup.None || cfg.Cleanup == "" {
		return nil
	}
	if _, err := cleanup.New(ctx, cleanup.Config{URL: cfg.PostgresURL, Tables: cfg.CleanupTables()}); err != nil {
		return []checklist.Item{{Name: "cleanup", Status: checklist.Fail, Detail: checklist.OneLine(err)}}
	}
	return []checklist.Item{{Name: "cleanup", Status: checklist.OK, Detail: "each table has a unique id column the role may delete by"}}
}

// tableNames are cfg's tables as schema.table.
func tableNames(cfg relay.Config) []string {
	names := make([]string, len(cfg.Tables))
	for i, t := range cfg.Tables {
		names[i] = t.Qualified()
	}
	return names
}
