package contract

import (
	"errors"
	"strings"
	"testing"
)

// branch is one of chain's three branches: each goes down into "a".
func branch(required string) string {
	return `{"properties": {"a": {"$ref": "#"}}, "required": ["` + required + `"]}`
}

// chain is a recursive anyOf of three branches: jsonschema evaluates a
// payload that fails it (15·3^d - 7)/2 times for d levels of nesting.
var chain = `{"anyOf": [` + branch("x") + `, ` + branch("y") + `, ` + branch("z") + `]}`

// nested is d levels of {"a": …} around {}: 6d+2 bytes.
func nested(d int) []byte {
	return []byte(strings.Repeat(`{"a":`, d) + `{}` + strings.Repeat("}", d))
}

// TestValidateWithinBudget: a payload the contract would take more steps
// to check than its budget is refused as such, without being validated
// (before, 14 levels of chain took 51 s); one within it is validated.
// Run with a test timeout: before the budget the deep cases do not end.
func TestValidateWithinBudget(t *testing.T) {
	set, err := Load(writeDir(t, map[string]string{"Chain.json": chain}), UnknownAllow)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		depth      int
		overBudget bool // else an ordinary violation: no x, y nor z
	}{
		{depth: 0}, {depth: 3}, {depth: 8},
		{depth: 9, overBudget: true}, {depth: 14, overBudget: true}, {depth: 2000, overBudget: true},
	} {
		payload := nested(tc.depth)
		err := set.Validate("Chain", payload)
		var v *Violation
		if !errors.As(err, &v) {
			t.Fatalf("%d levels: %v, want a *Violation", tc.depth, err)
		}
		if v.OverBudget != tc.overBudget {
			t.Errorf("%d levels: %v (over budget %v), want over budget %v", tc.depth, err, v.OverBudget, tc.overBudget)
		}
		if tc.overBudget && (v.Location() != "" || !strings.Contains(err.Error(), "steps")) {
			t.Errorf("%d levels: %v, location %q: want the budget said, and no location", tc.depth, err, v.Location())
		}
	}
}

// TestSteps: the bound is exact where the validator evaluates every
// branch (a payload that fails chain), stops counting past its limit, and
// counts a type's early exit as one step.
func TestSteps(t *testing.T) {
	set, err := Load(writeDir(t, map[string]string{"Chain.json": chain,
		"Value.json": `{"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}, {"type": "object", "additionalProperties": {"$ref": "#"}}]}`,
	}), UnknownAllow)
	if err != nil {
		t.Fatal(err)
	}
	count := func(typ, payload string, limit int) int {
		v, err := decodeJSON([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		return steps(set.contracts[typ].schema, v, limit)
	}
	for d, want := range []int{4, 19, 64, 199} {
		if got := count("Chain", string(nested(d)), 1<<40); got != want {
			t.Errorf("chain, %d levels: %d steps, want %d", d, got, want)
		}
	}
	if got := count("Chain", string(nested(40)), 1000); got != 1001 {
		t.Errorf("chain, 40 levels, limit 1000: %d steps, want 1001 (3^40 would overflow)", got)
	}
	// Linear: each value's three branches, two stopped by their type.
	if got := count("Value", `[["s", {"k": "s"}]]`, 1<<40); got != 24 {
		t.Errorf("value: %d steps, want 24", got)
	}
}
