package relay

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
)

// TestHealNeedsCleanup: --on-slot-lost heal is refused, naming the flag
// and why, where nothing in the table says which rows were published: no
// cleanup, or marks of dead letters alone, or no table at all; with a
// cleanup that says it, it is accepted, and fail (the default) is accepted
// with any cleanup.
func TestHealNeedsCleanup(t *testing.T) {
	mark, err := cleanup.ParseSet("published=true", false)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := cleanup.ParseSet("dead=true", true)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		policy  SlotLostPolicy
		cleanup cleanup.Policy
		mark    []cleanup.Set
		dead    []cleanup.Set
		refused string // "" when accepted
	}{
		{"fail is the default's behaviour", SlotLostFail, cleanup.None, nil, nil, ""},
		{"heal without cleanup", SlotLostHeal, cleanup.None, nil, nil, "OnSlotLost heal needs Cleanup"},
		{"heal marking dead letters alone", SlotLostHeal, cleanup.Mark, nil, []cleanup.Set{dead}, "OnSlotLost heal needs Cleanup"},
		{"heal deleting", SlotLostHeal, cleanup.DeleteAfterPublish, nil, nil, ""},
		{"heal marking", SlotLostHeal, cleanup.Mark, []cleanup.Set{mark}, nil, ""},
		{"an unknown policy", "retry", cleanup.None, nil, nil, "OnSlotLost \"retry\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.PostgresURL, cfg.Kafka.Brokers = "postgres://x", []string{"k:1"}
			cfg.OnSlotLost, cfg.Cleanup = c.policy, c.cleanup
			cfg.Defaults.Mark, cfg.Defaults.MarkDead = c.mark, c.dead
			cfg.Tables = []Table{cfg.Table("public.outbox")}
			err := cfg.Validate()
			var ce *ConfigError
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused == "":
			case !errors.As(err, &ce) || ce.Field != "OnSlotLost" || !strings.Contains(err.Error(), c.refused):
				t.Fatalf("got %v, want a ConfigError for OnSlotLost saying %q", err, c.refused)
			case c.policy == SlotLostHeal && !strings.Contains(err.Error(), "published"):
				t.Errorf("%v: does not say why (what was published)", err)
			}
		})
	}
}

// TestDefaultSlotLostIsFail: without the setting the relay fails as
// before on a lost slot.
func TestDefaultSlotLostIsFail(t *testing.T) {
	if got := Default().OnSlotLost; got != SlotLostFail {
		t.Errorf("default %q, want %q", got, SlotLostFail)
	}
}
