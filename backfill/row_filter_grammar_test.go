package backfill

import "testing"

// TestRowFilterThatPublishesIsOneTheBackfillNarrowsBy: a --where that
// PostgreSQL takes as a publication row filter (immutable built-ins only)
// already shares the outbox's rows out between relays; a backfill on such
// a relay narrows by it, instead of refusing to start.
func TestRowFilterThatPublishesIsOneTheBackfillNarrowsBy(t *testing.T) {
	for _, filter := range []string{
		"region ~ '^eu-'",
		"tenant_id = any('{1,2}'::int[])",
		"target_broker = any(array['partner','partner-b'])",
	} {
		if _, err := withRowFilter("processed_at is null", filter); err != nil {
			t.Errorf("--where %s: %v, want the backfill narrowed by it", filter, err)
		}
	}
}
