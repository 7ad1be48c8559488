package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/admin"
	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// The check, setup and status commands: package admin answers, these print
// the answers and choose the exit code.

// check runs `outbox-cdc check`: the Postgres items, then the Kafka ones;
// with --offline, the configuration alone.
func check(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	r, err := admin.Check(ctx, cfg.Relay, admin.Offline(cfg.Offline), admin.Transport(cfg.PostgresTransport(), cfg.KafkaTransport(), cfg.RegistryTransport()))
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc check: %s\n", red.oneLine(err))
		return exitUsage
	}
	if r.Offline {
		// The items that need no server: the contracts, compiled.
		if failed := checklist.Print(stdout, r.Items); failed > 0 {
			fmt.Fprintf(stdout, "\noutbox-cdc check --offline: %d of %d checks failed; no server was asked\n", failed, len(r.Items))
			return exitUsage
		}
		fmt.Fprintf(stdout, "outbox-cdc check --offline: the configuration is valid (postgres %s, kafka %s, tables %s); no server was asked\n",
			r.Postgres, strings.Join(r.Brokers, ","), r.Tables)
		return exitOK
	}
	fmt.Fprintf(stdout, "outbox-cdc check: postgres %s, kafka %s, tables %s\n\n", r.Postgres, strings.Join(r.Brokers, ","), r.Tables)
	items := make([]checklist.Item, len(r.Items))
	for i, it := range r.Items {
		it.Detail, it.Fix = red.redact(it.Detail), red.redact(it.Fix)
		items[i] = it
	}
	if failed := checklist.Print(stdout, items); failed > 0 {
		fmt.Fprintf(stdout, "\n%d of %d checks failed\n", failed, len(items))
		return exitFailure
	}
	fmt.Fprintf(stdout, "\nall %d checks passed\n", len(items))
	return exitOK
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
	if cfg.Relay.PostgresURL != "" {
		c, err := admin.Connect(ctx, cfg.Relay.PostgresURL)
		if err != nil {
			return fail(err)
		}
		defer c.Close(context.Background())
		conn = c
	}
	plan, err := admin.Plan(ctx, cfg.Relay, cfg.Role, conn)
	if err != nil {
		return fail(err)
	}
	if cfg.Print {
		fmt.Fprintf(stdout, "-- outbox-cdc setup for %s (publication %s, slot %s)\n", plan.Tables, plan.Publication, plan.Slot)
		for _, s := range plan.Statements {
			fmt.Fprintln(stdout, s)
		}
		for _, t := range plan.Topics {
			fmt.Fprintf(stdout, "-- kafka: create topic %s (%s) unless it exists\n", t.Name, t.Spec)
		}
		return exitOK
	}
	done, err := admin.Apply(ctx, cfg.Relay, plan, conn)
	for _, t := range done.Topics {
		if t.Created {
			fmt.Fprintf(stdout, "done: created topic %s (%s)\n", t.Name, t.Spec)
		} else {
			fmt.Fprintf(stdout, "topic %s exists\n", t.Name)
		}
	}
	if err == nil && len(plan.Statements) == 0 {
		fmt.Fprintln(stdout, "nothing to do: the publication, the slot and the grants are in place")
	}
	for _, s := range done.Statements {
		fmt.Fprintln(stdout, "done:", s)
	}
	if err != nil {
		return fail(err)
	}
	return exitOK
}

// status runs `outbox-cdc status`, in text or (--json) JSON.
func status(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	r, err := admin.Status(ctx, cfg.Relay)
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc status: %s\n", red.oneLine(err))
		return exitFailure
	}
	if cfg.JSON {
		if err := writeJSON(stdout, r); err != nil {
			fmt.Fprintf(stderr, "outbox-cdc status: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	for _, l := range r.Lines() {
		fmt.Fprintf(stdout, "%-14s %s\n", l.Label+":", l.Text)
	}
	return exitOK
}
