package delivery

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/replication"
)

// TestBackfillCommitsInExactlyOnce: an exactly-once backfill (or heal)
// commits its rows with its progress (backfill.Config.Committed); a forced
// one, and at-least-once's, do not: they publish at least once.
func TestBackfillCommitsInExactlyOnce(t *testing.T) {
	for _, tt := range []struct {
		name        string
		mode        Name
		force, heal bool
		commits     bool
	}{
		{"at least once", AtLeastOnce, false, false, false},
		{"at least once, a heal", AtLeastOnce, false, true, false},
		{"exactly once", ExactlyOnce, false, false, true},
		{"exactly once, a heal", ExactlyOnce, false, true, true},
		{"exactly once, forced", ExactlyOnce, true, false, false},
		{"exactly once, a heal over a slot made anew", ExactlyOnce, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Mode = tt.mode
			b := mustNew(t, cfg, stubEnv(t)).Backfill(tt.force, tt.heal)
			if commits := b.Committed() != nil; commits != tt.commits {
				t.Errorf("commits %v, want %v", commits, tt.commits)
			}
		})
	}
}

// TestBackfillWrites: an exactly-once backfill's publisher writes in
// Kafka transactions under the slot's transactional id, paced by
// --batch-timeout alone (no commit ticks: the backfill commits as it
// reads); at-least-once's writes no transaction.
func TestBackfillWrites(t *testing.T) {
	const batch = 7 * time.Millisecond
	_, m := openCluster(t)
	m.env.Identify = func(context.Context) (replication.System, error) { return openSystem, nil }
	m.env.SlotPosition = func(context.Context) (pglogrepl.LSN, error) { return openStart, nil }
	for _, tt := range []struct {
		name string
		b    Backfill
		txn  bool
	}{
		{"exactly once", m.Backfill(false, false), true},
		{"at least once", mustNew(t, Config{Mode: AtLeastOnce}, Env{Log: slog.New(slog.DiscardHandler)}).Backfill(false, false), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := tt.b.Open(ctx, func(w Writes) (Publisher, error) {
				if txn := w.Transaction(); (txn != nil) != tt.txn {
					t.Errorf("transactional %v, want %v", txn != nil, tt.txn)
				} else if txn != nil && txn.TransactionalID() != testConfig().TransactionalID(openSystem.ID) {
					t.Errorf("transactional id %s, want the slot's", txn.TransactionalID())
				}
				if got := w.BatchTimeout(batch); got != batch {
					t.Errorf("batch timeout %s, want --batch-timeout's %s", got, batch)
				}
				return Publisher{}, nil
			})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if err := tt.b.End(true); err != nil {
				t.Errorf("end with no row handed over: %v", err)
			}
		})
	}
}
