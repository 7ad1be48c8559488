package admin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/contract"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// checkContracts compiles every contract of --contracts, as run does at
// start, asking no server: one item for the directory when all compile,
// otherwise a failing item for each file that cannot be used (run would
// refuse to start, naming the first ones).
func checkContracts(cfg relay.Config) []checklist.Item {
	c := cfg.Contracts
	if c.Dir == "" {
		return nil
	}
	set, err := contract.Load(c.Dir, c.Unknown)
	var le *contract.LoadError
	switch {
	case errors.As(err, &le):
		items := make([]checklist.Item, len(le.Problems))
		for i, p := range le.Problems {
			items[i] = checklist.Item{Name: "contract " + p.File, Status: checklist.Fail, Detail: p.Err.Error(),
				Fix: fmt.Sprintf("correct it (JSON Schema, draft 2020-12 unless $schema says otherwise; a $ref names a file in %s, by path or $id), or take it out of the directory", c.Dir)}
		}
		return items
	case err != nil:
		return []checklist.Item{{Name: "contracts", Status: checklist.Fail, Detail: checklist.OneLine(err),
			Fix: "--contracts must name a readable directory of JSON Schema files"}}
	}
	types := set.EventTypes()
	listed := types
	if len(listed) > 10 {
		listed = append(listed[:10:10], fmt.Sprintf("and %d more", len(types)-10))
	}
	refused := "dead-lettered"
	if deadLetterTopic(cfg) == "" {
		refused = "invalid, which stops the relay (--on-invalid=fail)"
	}
	unknown := "published unchecked"
	if c.Unknown == contract.UnknownDeadLetter {
		unknown = refused + " (contract_missing)"
	}
	items := []checklist.Item{{Name: "contracts", Status: checklist.OK,
		Detail: fmt.Sprintf("%d compiled from %s (%s); payloads that fail are %s (contract_violation); event types without a contract are %s",
			len(types), c.Dir, strings.Join(listed, ", "), refused, unknown)}}
	return append(items, contractHazards(set, c.Dir, refused)...)
}

// contractHazards warns of each contract whose check can be costly: every
// payload is held to a budget of steps, and one over it is refused
// unchecked, so a hazard is a contract that may refuse valid payloads
// (and spends up to the budget on each), not a stream that stalls.
func contractHazards(set *contract.Set, dir, refused string) []checklist.Item {
	hazards := set.Hazards()
	var items []checklist.Item
	for _, t := range set.EventTypes() {
		why, ok := hazards[t]
		if !ok {
			continue
		}
		file, _ := set.File(t)
		items = append(items, checklist.Item{Name: "contract " + filepath.Join(dir, file), Status: checklist.Warn,
			Detail: fmt.Sprintf("%s: %s; a payload whose check would take over its budget of steps is %s unchecked (contract_budget_exceeded)", t, why, refused),
			Fix:    "give the branches of anyOf/oneOf something that tells them apart before they recurse (a type, or a const property checked in an if/then), or flatten the combinators"})
	}
	return items
}
