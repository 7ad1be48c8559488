package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// check runs `outbox-cdc check`: the Postgres items, then the Kafka ones.
func check(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	sec, err := relay.Security(cfg.Kafka)
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc check: %s\n", red.oneLine(err))
		return exitUsage
	}
	fmt.Fprintf(stdout, "outbox-cdc check: postgres %s, kafka %s, tables %s\n\n", cfg.PostgresTarget(), strings.Join(cfg.KafkaBrokers, ","), cfg.TableNames())
	items := append(slot.Check(ctx, cfg.PostgresURL, relay.Target(cfg)), cfg.PostgresTransport())
	items = slices.Insert(items, min(1, len(items)), checkVersion(ctx, cfg.PostgresURL)...)
	if cfg.Cleanup != config.CleanupNone {
		if _, err := cleanup.New(ctx, cleanup.Config{URL: cfg.PostgresURL, Tables: relay.CleanupTables(cfg)}); err != nil {
			items = append(items, checklist.Item{Name: "cleanup", Status: checklist.Fail, Detail: red.oneLine(err)})
		} else {
			items = append(items, checklist.Item{Name: "cleanup", Status: checklist.OK, Detail: "each table has a unique id column the role may delete by"})
		}
	}
	items = append(items, checkBackfill(ctx, cfg, red)...)
	var templates []string
	for _, t := range cfg.Tables {
		if !slices.Contains(templates, t.Topic) {
			templates = append(templates, t.Topic)
		}
	}
	if cfg.MessagePrefix != "" {
		items = append(items, checklist.Item{Name: "messages", Status: checklist.OK,
			Detail: fmt.Sprintf("transactional logical decoding messages with prefix %q are events (outbox.Writer's Emit, sql/outbox_emit.sql), routed by %s", cfg.MessagePrefix, cfg.Topic)})
		if !slices.Contains(templates, cfg.Topic) {
			templates = append(templates, cfg.Topic)
		}
	}
	dlq := ""
	if cfg.OnInvalid == config.OnInvalidDLQ {
		dlq = cfg.DeadLetterTopic
	}
	items = append(items, cfg.KafkaTransport())
	items = append(items, sink.Check(ctx, sink.CheckConfig{
		Brokers: cfg.KafkaBrokers, Security: sec, Templates: templates,
		DeadLetterTopic: dlq, AutoCreateTopics: cfg.AutoCreateTopics, CreateTopics: cfg.CreateTopics, Spec: relay.TopicSpec(cfg),
	})...)
	for i := range items {
		items[i].Detail, items[i].Fix = red.redact(items[i].Detail), red.redact(items[i].Fix)
	}
	failed := checklist.Print(stdout, items)
	if failed > 0 {
		fmt.Fprintf(stdout, "\n%d of %d checks failed\n", failed, len(items))
		return exitFailure
	}
	fmt.Fprintf(stdout, "\nall %d checks passed\n", len(items))
	return exitOK
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
	var v int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		return []checklist.Item{{Name: name, Status: checklist.Fail, Detail: "could not read: " + checklist.OneLine(err)}}
	}
	if why := slot.UnsupportedVersion(v); why != "" {
		return []checklist.Item{{Name: name, Status: checklist.Fail, Detail: why,
			Fix: fmt.Sprintf("upgrade to PostgreSQL %d or newer", slot.MinServerVersion/10000)}}
	}
	return []checklist.Item{{Name: name, Status: checklist.OK, Detail: fmt.Sprintf("%d, supported (%d and newer)", v/10000, slot.MinServerVersion/10000)}}
}

// setup runs `outbox-cdc setup`: with --print it prints the SQL for a fresh
// database (or, given --postgres-url, only what is missing there); otherwise
// it runs what is missing.
func setup(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "outbox-cdc setup: %s\n", red.oneLine(err))
		return exitFailure
	}
	var conn *pgx.Conn
	if cfg.PostgresURL != "" {
		c, err := pgx.Connect(ctx, cfg.PostgresURL)
		if err != nil {
			return fail(fmt.Errorf("connect to postgres (%s): %w", relay.PostgresHint(err), err))
		}
		defer c.Close(context.Background())
		conn = c
	}
	var privileges []string
	switch cfg.Cleanup {
	case config.CleanupDeleteAfterPublish:
		privileges = append(privileges, "DELETE")
	case config.CleanupMark:
		privileges = append(privileges, "UPDATE")
	}
	backfilling := false
	for _, t := range cfg.Tables {
		backfilling = backfilling || t.BackfillWhere != ""
	}
	if backfilling {
		privileges = append(privileges, "SELECT")
	}
	stmts, err := slot.SetupSQL(ctx, conn, relay.Target(cfg), cfg.Role, privileges, backfilling)
	if err != nil {
		return fail(err)
	}
	if backfilling && cfg.Role != "" && len(cfg.Tables) > 0 {
		stmts = append(stmts, backfill.SetupSQL(cfg.Tables[0].Schema, cfg.Role)...)
	}
	topics := setupTopics(cfg)
	if cfg.Print {
		fmt.Fprintf(stdout, "-- outbox-cdc setup for %s (publication %s, slot %s)\n", cfg.TableNames(), cfg.Publication, cfg.Slot)
		for _, s := range stmts {
			fmt.Fprintln(stdout, s)
		}
		for _, t := range topics {
			fmt.Fprintf(stdout, "-- kafka: create topic %s (%s) unless it exists\n", t.name, t.spec)
		}
		return exitOK
	}
	for _, t := range topics {
		created, err := sink.EnsureTopic(ctx, cfg.KafkaBrokers, t.sec, t.name, t.spec)
		switch {
		case err != nil:
			return fail(err)
		case created:
			fmt.Fprintf(stdout, "done: created topic %s (%s)\n", t.name, t.spec)
		default:
			fmt.Fprintf(stdout, "topic %s exists\n", t.name)
		}
	}
	if len(stmts) == 0 {
		fmt.Fprintln(stdout, "nothing to do: the publication, the slot and the grants are in place")
		return exitOK
	}
	for _, s := range stmts {
		if strings.HasPrefix(s, "--") {
			continue
		}
		if _, err := conn.Exec(ctx, s); err != nil {
			return fail(fmt.Errorf("%s: %w", s, err))
		}
		fmt.Fprintln(stdout, "done:", s)
	}
	return exitOK
}

// status runs `outbox-cdc status`.
func status(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	conn, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc status: %s\n", red.oneLine(fmt.Errorf("connect to postgres (%s): %w", relay.PostgresHint(err), err)))
		return exitFailure
	}
	defer conn.Close(context.Background())
	st, err := slot.ReadSlotState(ctx, conn, relay.Target(cfg))
	if errors.Is(err, slot.ErrNoSlot) {
		fmt.Fprintf(stderr, "outbox-cdc status: slot %q does not exist; outbox-cdc run (or setup) creates it\n", cfg.Slot)
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc status: %s\n", red.oneLine(err))
		return exitFailure
	}
	var backfills map[string]backfill.BackfillState
	if len(cfg.Tables) > 0 {
		if backfills, err = backfill.ReadBackfills(ctx, conn, cfg.Tables[0].Schema, cfg.Slot); err != nil {
			fmt.Fprintf(stderr, "outbox-cdc status: %s\n", red.oneLine(err))
			return exitFailure
		}
	}
	if cfg.JSON {
		out := struct {
			slot.SlotState
			ConfirmedLSN string                            `json:"confirmed_lsn"`
			RestartLSN   string                            `json:"restart_lsn"`
			CurrentLSN   string                            `json:"current_wal_lsn"`
			Backfills    map[string]backfill.BackfillState `json:"backfills,omitempty"`
		}{st, st.Confirmed.String(), st.Restart.String(), st.Current.String(), backfills}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "outbox-cdc status: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	consumer := "none (events wait in the WAL until outbox-cdc run streams the slot)"
	if st.Active {
		consumer = fmt.Sprintf("streaming, pid %d", st.ActivePID)
		if st.Client != "" {
			consumer += " (" + st.Client + ")"
		}
	}
	safe := "unlimited (max_slot_wal_keep_size = -1)"
	if st.SafeWALSize != nil {
		safe = byteSize(*st.SafeWALSize)
	}
	walStatus := st.WALStatus
	switch st.WALStatus {
	case "lost":
		safe = "none"
		walStatus = "lost: the slot was invalidated and can no longer stream; outbox-cdc run says what was lost and how to recover"
	case "unreserved":
		walStatus = "unreserved: the slot is about to lose WAL it needs; start outbox-cdc run now"
	}
	carries := "yes"
	if !st.Publication {
		carries = "NO: outbox-cdc check names the missing tables and the ALTER PUBLICATION to run"
	}
	rows := [][2]string{
		{"slot", fmt.Sprintf("%s (plugin %s, database %s)", st.Slot, st.Plugin, st.Database)},
		{"consumer", consumer},
		{"confirmed", st.Confirmed.String()},
		{"current WAL", st.Current.String()},
		{"lag", byteSize(st.LagBytes) + " of WAL written since the confirmed position"},
		{"retained", byteSize(st.RetainedBytes) + " of WAL kept for the slot"},
		{"wal_status", walStatus},
		{"safe_wal_size", safe},
		{"publication", fmt.Sprintf("%s carries %s: %s", cfg.Publication, cfg.TableNames(), carries)},
		{"failover", failoverLine(st)},
	}
	for _, t := range cfg.Tables {
		if b, ok := backfills[t.Qualified()]; ok {
			rows = append(rows, [2]string{"backfill", fmt.Sprintf("%s: %s, %d of %d rows acknowledged (from the snapshot at %s), updated %s",
				b.Table, b.Phase, b.Done, b.Total, b.ConsistentPoint, b.Updated.UTC().Format(time.RFC3339))})
		}
	}
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-14s %s\n", r[0]+":", r[1])
	}
	return exitOK
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkBackfill checks each --backfill-where: it plans, and the role may
// read the table.
func checkBackfill(ctx context.Context, cfg config.Config, red redactor) []checklist.Item {
	var items []checklist.Item
	target := relay.Target(cfg)
	for i, t := range cfg.Tables {
		if t.BackfillWhere == "" {
			continue
		}
		name := "backfill of " + t.Qualified()
		conn, err := pgx.Connect(ctx, cfg.PostgresURL)
		if err != nil {
			return append(items, checklist.Item{Name: name, Status: checklist.Fail, Detail: red.oneLine(err)})
		}
		var canSelect bool
		_ = conn.QueryRow(ctx, `SELECT has_table_privilege(current_user, $1, 'SELECT')`, pgx.Identifier{t.Schema, t.Name}.Sanitize()).Scan(&canSelect)
		_, err = backfill.CheckPredicate(ctx, conn, target.Tables[i], t.BackfillWhere)
		order, orderErr := backfill.ParseOrder(t.BackfillOrder)
		if orderErr == nil {
			order, orderErr = backfill.ChooseOrder(ctx, conn, target.Tables[i], order)
		}
		switch {
		case err != nil:
			items = append(items, checklist.Item{Name: name, Status: checklist.Fail, Detail: red.oneLine(err),
				Fix: "correct --backfill-where: one boolean expression over the table's own columns, calling no volatile function"})
		case orderErr != nil:
			items = append(items, checklist.Item{Name: name, Status: checklist.Fail, Detail: red.oneLine(orderErr), Fix: "set --backfill-order"})
		case !canSelect:
			items = append(items, checklist.Item{Name: name, Status: checklist.Fail, Detail: "the role may not SELECT the table, which the backfill reads",
				Fix: fmt.Sprintf("as the table's owner: GRANT SELECT ON %s TO the role (outbox-cdc setup --backfill-where … --role … does)", pgx.Identifier{t.Schema, t.Name}.Sanitize())})
		default:
			items = append(items, checklist.Item{Name: name, Status: checklist.OK, Detail: fmt.Sprintf("WHERE %s plans, reading the table alone; rows in %s order; the role may read the table", t.BackfillWhere, order)})
		}
		conn.Close(context.Background())
	}
	return items
}

// setupTopic is a topic setup creates: the dead-letter topic and each
// table's fixed topic (a template with fields names topics only rows know).
type setupTopic struct {
	name string
	spec sink.TopicSpec
	sec  sink.Security
}

func setupTopics(cfg config.Config) []setupTopic {
	if len(cfg.KafkaBrokers) == 0 || !cfg.CreateTopics {
		return nil
	}
	sec, err := relay.Security(cfg.Kafka)
	if err != nil {
		return nil
	}
	var out []setupTopic
	if cfg.OnInvalid == config.OnInvalidDLQ {
		out = append(out, setupTopic{cfg.DeadLetterTopic, relay.TopicSpec(cfg), sec})
	}
	for _, t := range cfg.Tables {
		tp, err := sink.ParseTopic(t.Topic)
		if err != nil {
			continue
		}
		if name, ok := tp.Fixed(); ok && !slices.ContainsFunc(out, func(s setupTopic) bool { return s.name == name }) {
			spec := relay.TopicSpec(cfg)
			spec.Partitions, spec.ReplicationFactor = t.Partitions, t.ReplicationFactor
			out = append(out, setupTopic{name, spec, sec})
		}
	}
	return out
}

// failoverLine says whether the slot survives a failover to a standby.
func failoverLine(st slot.SlotState) string {
	switch {
	case st.Synced:
		return "yes: this server is a standby and its copy of the slot is synchronized"
	case st.Failover && st.Standbys > 0 && st.SynchronizedStandbySlots == "":
		return fmt.Sprintf("yes: failover-enabled, %d physical standby(s) streaming; but synchronized_standby_slots is not set, so events a standby lacks can be published (see outbox-cdc check)", st.Standbys)
	case st.Failover && st.SynchronizedStandbySlots != "":
		return fmt.Sprintf("yes: failover-enabled, %d physical standby(s) streaming, changes held until %s have them", st.Standbys, st.SynchronizedStandbySlots)
	case st.Failover:
		return fmt.Sprintf("yes: failover-enabled, %d physical standby(s) streaming", st.Standbys)
	case st.ServerVersion < 170000:
		return fmt.Sprintf("no: logical slots do not survive a failover before PostgreSQL 17 (this is %d)", st.ServerVersion/10000)
	}
	return fmt.Sprintf("no: not failover-enabled (%d physical standby(s) streaming); see outbox-cdc check", st.Standbys)
}
