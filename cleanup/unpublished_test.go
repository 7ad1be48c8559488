package cleanup

import (
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/predicate"
)

func mustSets(t *testing.T, dead bool, specs ...string) []Set {
	t.Helper()
	var out []Set
	for _, s := range specs {
		set, err := ParseSet(s, dead)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, set)
	}
	return out
}

// TestUnpublishedSelectsRowsNotYetCleaned: the heal's predicate is every
// row under delete-after-publish, and under mark the rows not carrying
// every --mark value nor every --mark-dead value; a NULL column never
// hides a row (IS NOT DISTINCT FROM, never =); and what it renders passes
// the backfill's restricted grammar, so it reaches SQL only as a checked
// predicate.
func TestUnpublishedSelectsRowsNotYetCleaned(t *testing.T) {
	tb := decode.Table{Schema: "public", Name: "outbox"}
	cases := []struct {
		name   string
		policy Policy
		mark   []string
		dead   []string
		want   string
	}{
		{"delete: every row", DeleteAfterPublish, nil, nil, "true"},
		{"mark a time", Mark, []string{"published_at=now()"}, nil, `NOT ("published_at" IS NOT NULL)`},
		{"mark a flag and a status", Mark, []string{"sent=true", "status='Pub''d'"}, nil,
			`NOT ("sent" IS NOT DISTINCT FROM true AND "status" IS NOT DISTINCT FROM 'Pub''d')`},
		{"mark with dead letters marked", Mark, []string{"state=2"}, []string{"state=9", "why=reason"},
			`NOT ("state" IS NOT DISTINCT FROM 2) AND NOT ("state" IS NOT DISTINCT FROM 9 AND "why" IS NOT NULL)`},
		{"a column name needing quotes", Mark, []string{`Done"x=false`}, nil, `NOT ("Done""x" IS NOT DISTINCT FROM false)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := Table{Table: tb, Mark: mustSets(t, false, c.mark...), MarkDead: mustSets(t, true, c.dead...)}
			got, err := Unpublished(c.policy, table)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("predicate\n got %s\nwant %s", got, c.want)
			}
			if _, err := predicate.ParseRestricted("--on-slot-lost", got); err != nil {
				t.Errorf("refused by the backfill's grammar: %v", err)
			}
		})
	}
}

// TestUnpublishedRefusesWithoutAMark: without cleanup, or marking only
// dead letters, nothing in the table says what was published.
func TestUnpublishedRefusesWithoutAMark(t *testing.T) {
	tb := Table{Table: decode.Table{Schema: "public", Name: "outbox"}}
	if _, err := Unpublished(None, tb); err == nil || !strings.Contains(err.Error(), "nothing in the table says") {
		t.Errorf("cleanup none: %v, want a refusal saying why", err)
	}
	tb.MarkDead = mustSets(t, true, "dead=true")
	if _, err := Unpublished(Mark, tb); err == nil || !strings.Contains(err.Error(), "--mark") {
		t.Errorf("mark-dead alone: %v, want a refusal naming --mark", err)
	}
}
