package relay

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// TestFailModeSaysAKnownSlotIsGone: with --on-slot-lost fail a missing
// slot is created as it always was, but one this database recorded (or
// backfilled) before is a slot lost while the relay was away: one WARN
// says so, and what heals it. The slot is recorded whenever it is not
// yet, in this mode too, so that a heal recognizes it later.
func TestFailModeSaysAKnownSlotIsGone(t *testing.T) {
	for _, c := range []struct {
		name         string
		f            healFacts
		warn, record bool
	}{
		{"a first start", healFacts{loss: slot.LossMissing}, false, true},
		{"missing, recorded here before", healFacts{loss: slot.LossMissing, known: true}, true, false},
		{"missing, a backfill of it recorded", healFacts{loss: slot.LossMissing, backfilled: true}, true, true},
		{"healthy, not yet recorded", healFacts{loss: slot.LossNone}, false, true},
		{"healthy and recorded", healFacts{loss: slot.LossNone, known: true}, false, false},
		{"invalidated (the usual preparation refuses it)", healFacts{loss: slot.LossWALRemoved, known: true}, false, false},
	} {
		warn, record := decideFail(c.f)
		if warn != c.warn || record != c.record {
			t.Errorf("%s: warn %v record %v, want %v %v", c.name, warn, record, c.warn, c.record)
		}
	}
	var logs bytes.Buffer
	r, err := New(notifyConfig(), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	r.warnKnownSlotMissing()
	line := logs.String()
	for _, want := range []string{`"level":"WARN"`, `"slot":"outbox_cdc"`, "existed here before", "failover", "restore",
		"may be missing", "--on-slot-lost heal", "--cleanup"} {
		if !strings.Contains(line, want) {
			t.Errorf("the warning does not say %q: %s", want, line)
		}
	}
}
