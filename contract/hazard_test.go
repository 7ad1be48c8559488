package contract

import (
	"fmt"
	"strings"
	"testing"
)

// TestHazards: a contract whose branches each recurse into the payload,
// or that applies very many schemas to one value, is named with why; a
// recursive contract whose branches are told apart by type, or whose
// recursion has one branch, is not.
func TestHazards(t *testing.T) {
	defs := []string{`"d0": {"type": "integer"}`} // 2^15 schemas on one value
	for i := 1; i <= 15; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d": {"allOf": [{"$ref": "#/$defs/d%d"}, {"$ref": "#/$defs/d%d"}]}`, i, i-1, i-1))
	}
	wide := `{"$defs": {` + strings.Join(defs, ", ") + `}, "$ref": "#/$defs/d15"}`
	set, err := Load(writeDir(t, map[string]string{
		"Chain.json":  chain,
		"OneOf.json":  `{"$defs": {"n": {"oneOf": [{"properties": {"a": {"$ref": "#/$defs/n"}}}, {"items": {"$ref": "#/$defs/n"}}]}}, "$ref": "#/$defs/n"}`,
		"Wide.json":   wide,
		"Value.json":  `{"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}, {"type": "object", "additionalProperties": {"$ref": "#"}}]}`,
		"Tree.json":   screenSchemas["Tree"],
		"Nested.json": screenSchemas["Nested"],
		"Order.json":  orderSchema, "common/money.json": moneySchema,
	}), UnknownAllow)
	if err != nil {
		t.Fatal(err)
	}
	hazards := set.Hazards()
	for typ, want := range map[string]string{
		"Chain":  "Chain.json# applies 3 branches that each lead back to it",
		"OneOf":  "OneOf.json#/$defs/n applies 2 branches",
		"Nested": "Nested.json#/$defs/n applies 2 branches", // two arrays: not told apart by type
		"Wide":   "applies over 10000 schemas to one value",
	} {
		if !strings.Contains(hazards[typ], want) || !strings.Contains(hazards[typ], "exponential") && typ != "Wide" {
			t.Errorf("%s: hazard %q, want %q", typ, hazards[typ], want)
		}
	}
	for _, typ := range []string{"Value", "Tree", "Order"} {
		if h, ok := hazards[typ]; ok {
			t.Errorf("%s: hazard %q, want none", typ, h)
		}
	}
}
