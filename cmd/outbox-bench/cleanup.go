package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The -cleanup scenario: what --cleanup costs per event. A backlog is
// drained with each policy in turn (none, delete-after-publish, mark), and
// the relay's rate and CPU, and the WAL its statements add, are compared.

// cleanupRun is one drain under one policy.
type cleanupRun struct {
	Policy      string
	N           int
	RelayRate   float64 // events/s until the slot confirms the last commit (every row cleaned by then)
	CPUPer100k  float64 // relay CPU seconds per 100,000 events
	WALPerEvent float64 // bytes of WAL written while the relay ran, per event: the cleaning statements
}

var cleanupPolicies = map[string][]string{
	"none":                 nil,
	"delete-after-publish": {"--cleanup", "delete-after-publish"},
	"mark":                 {"--cleanup", "mark", "--mark", "status='Published'", "--mark", "published_at=now()"},
}

func (b *bench) runCleanup(ctx context.Context, runs, n int, out string) error {
	var results []cleanupRun
	order := []string{"none", "delete-after-publish", "mark"}
	for round := range runs {
		if round%2 == 1 {
			order = []string{"mark", "delete-after-publish", "none"}
		} else {
			order = []string{"none", "delete-after-publish", "mark"}
		}
		for _, policy := range order {
			r, err := b.drainCleaning(ctx, policy, n)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", policy, round+1, err)
			}
			fmt.Fprintf(os.Stderr, "cleanup %-22s round %d: %.0f events/s, %.2f CPU s/100k, %.0f WAL bytes/event\n", policy, round+1, r.RelayRate, r.CPUPer100k, r.WALPerEvent)
			results = append(results, r)
		}
	}
	printCleanup(os.Stdout, runs, results)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "cleanup.json"))
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Machine, Command string
		Runs             []cleanupRun
	}{machine(), "go run ./cmd/outbox-bench " + strings.Join(os.Args[1:], " "), results})
}

// drainCleaning commits n rows in transactions of 100 behind a fresh slot
// and relays them with policy.
func (b *bench) drainCleaning(ctx context.Context, policy string, n int) (cleanupRun, error) {
	res := cleanupRun{Policy: policy, N: n}
	name := fmt.Sprintf("cbench_%d", time.Now().UnixNano()%1e9)
	for _, sql := range []string{
		"CREATE TABLE " + name + " " + strings.TrimSuffix(outboxDDL, ")") + ", status text NOT NULL DEFAULT 'Stored', published_at timestamptz)",
		fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')", name, name),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", name),
		fmt.Sprintf(`DO $$ BEGIN FOR t IN 0..%d LOOP
			INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) SELECT gen_random_uuid(), 'order', 'agg-' || (g %% 1000), 'created', %s
			FROM generate_series(t * 100, least(t * 100 + 99, %d - 1)) g;
			COMMIT; END LOOP; END $$`, (n-1)/100, name, payloadSQL, n),
	} {
		if _, err := b.db.Exec(ctx, sql); err != nil {
			return res, fmt.Errorf("%.60s: %w", sql, err)
		}
	}
	defer b.cleanup(name, name)
	end, err := b.walInsertLSN(ctx)
	if err != nil {
		return res, err
	}
	createTopics(ctx, b.brokers, name+".order")
	run, err := b.relayUntil(ctx, name, name, end, nil, cleanupPolicies[policy]...)
	if err != nil {
		return res, err
	}
	took, usage := run.took, run.usage
	after, err := b.walInsertLSN(ctx)
	if err != nil {
		return res, err
	}
	res.RelayRate = float64(n) / took.Seconds()
	res.CPUPer100k = cpuSeconds(usage) / float64(n) * 100_000
	res.WALPerEvent = float64(after-end) / float64(n)
	return res, nil
}

func printCleanup(w io.Writer, runs int, rs []cleanupRun) {
	fmt.Fprintf(w, "# --cleanup: %s, %d rounds, medians (min–max)\n\n| --cleanup | n | outbox-cdc events/s | CPU s/100k | WAL bytes/event added |\n|---|---|---|---|---|\n", machine(), runs)
	for _, p := range []string{"none", "delete-after-publish", "mark"} {
		var ps []cleanupRun
		for _, r := range rs {
			if r.Policy == p {
				ps = append(ps, r)
			}
		}
		if len(ps) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", p, ps[0].N, over(ps, func(r cleanupRun) float64 { return r.RelayRate }),
			over(ps, func(r cleanupRun) float64 { return r.CPUPer100k }), over(ps, func(r cleanupRun) float64 { return r.WALPerEvent }))
	}
}
