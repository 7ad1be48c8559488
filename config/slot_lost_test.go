package config

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

// TestOnSlotLostFromEachSource: --on-slot-lost is a flag, the variable
// OUTBOX_CDC_ON_SLOT_LOST and the config file's on_slot_lost, fail by
// default; heal without --cleanup is refused naming the flag.
func TestOnSlotLostFromEachSource(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	path := t.TempDir() + "/outbox.yaml"
	if err := os.WriteFile(path, []byte("on_slot_lost: heal\ncleanup: delete-after-publish\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  []string
		want relay.SlotLostPolicy
	}{
		{"default", nil, nil, relay.SlotLostFail},
		{"flag", []string{"--on-slot-lost", "heal", "--cleanup", "delete-after-publish"}, nil, relay.SlotLostHeal},
		{"environment", []string{"--cleanup", "delete-after-publish"}, []string{"OUTBOX_CDC_ON_SLOT_LOST=heal"}, relay.SlotLostHeal},
		{"config file", []string{"--config", path}, nil, relay.SlotLostHeal},
	}
	for _, c := range cases {
		cfg, err := Parse(CmdRun, append(append([]string{}, base...), c.args...), c.env, io.Discard)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if cfg.Relay.OnSlotLost != c.want {
			t.Errorf("%s: %q, want %q", c.name, cfg.Relay.OnSlotLost, c.want)
		}
	}
	_, err := Parse(CmdRun, append(base, "--on-slot-lost", "heal"), nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--on-slot-lost heal needs --cleanup") {
		t.Errorf("heal without cleanup: %v", err)
	}
}
