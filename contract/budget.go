package contract

import (
	"encoding/json"
	"reflect"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A contract can make jsonschema's validator take time exponential in the
// payload: it evaluates every branch of anyOf and oneOf against the same
// value, without remembering results, so a recursive anyOf of three
// branches evaluates a payload nested 14 deep 3^14 times (51 s for 91
// bytes, measured). The validator cannot be interrupted: it takes no
// context and runs to its end. So the budget is checked before it runs,
// on an upper bound of the work it would do, the steps: one per schema
// applied to one value, as the validator's recursion applies them, plus a
// step per enum value compared, per pair of items uniqueItems compares
// and per patternProperties tried on a key. The bound is computed over
// (schema, value) pairs, each once, so computing it takes polynomial time
// even when the bound is exponential, and it stops counting past the
// budget.
//
// A budget of steps rather than of time: the verdict is the same on every
// machine and every replay (a payload dead-lettered on a loaded host and
// published on an idle one would make a replay disagree with the stream),
// and it can be tested without a clock. A timer could not stop the
// validator anyway; it could only abandon it, still running, in a
// goroutine.
//
// The bound counts every branch as evaluated (anyOf stops at its first
// match) and ignores const and enum failing early, so it is loose, never
// under the work, except through $dynamicRef and $recursiveRef, counted
// as their static target.

// Steps a payload may cost: baseSteps, and stepsPerByte for each of its
// bytes. jsonschema took 0.7 to 3.5 µs a step here (a shared 2-core
// machine), so a small payload is held to 0.1 to 0.35 s, and one of 1 MB
// (Kafka's default message size) to about as long as its linear cost.
// An ordinary contract costs a few steps per value (the properties, a
// $ref, an allOf), and a value takes at least two bytes: far below.
const (
	baseSteps    = 100_000
	stepsPerByte = 8
)

// budgetFor is the steps a payload of n bytes may cost.
func budgetFor(n int) int { return baseSteps + stepsPerByte*n }

// costs computes the steps bound of one payload against one contract.
type costs struct {
	limit int // counting stops past it
	memo  map[costKey]int
	open  map[costKey]bool // being computed: a $ref cycle on one value
}

type costKey struct {
	s *jsonschema.Schema
	v uintptr // the object's or array's identity; a scalar's type
}

// steps is the bound of the validator's work for v, a decoded payload,
// against s: at most limit+1 (over the budget).
func steps(s *jsonschema.Schema, v any, limit int) int {
	c := costs{limit: limit, memo: map[costKey]int{}, open: map[costKey]bool{}}
	return c.cost(s, v)
}

// add is a+b, saturating past the limit.
func (c *costs) add(a, b int) int {
	if a > c.limit || b > c.limit || a+b > c.limit {
		return c.limit + 1
	}
	return a + b
}

func (c *costs) cost(s *jsonschema.Schema, v any) int {
	if s == nil {
		return 0
	}
	if s.Bool != nil {
		return 1
	}
	key := costKey{s, identity(v)}
	if n, ok := c.memo[key]; ok {
		return n
	}
	if c.open[key] {
		return 1 // the validator reports the cycle at once
	}
	c.open[key] = true
	n := c.own(s, v)
	delete(c.open, key)
	c.memo[key] = n
	return n
}

// own is the bound for v against s: its own step, then every schema the
// validator may apply, to v itself and to its members.
func (c *costs) own(s *jsonschema.Schema, v any) int {
	if s.Types != nil && !s.Types.IsEmpty() && !typeMay(s, v) {
		return 1 // the validator stops at the type
	}
	n := 1
	if s.Enum != nil {
		n = c.add(n, len(s.Enum.Values))
	}
	inPlace := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		inPlace = append(inPlace, s.DynamicRef.Ref)
	}
	inPlace = append(append(append(inPlace, s.AllOf...), s.AnyOf...), s.OneOf...)
	for _, sub := range inPlace {
		if n = c.add(n, c.cost(sub, v)); n > c.limit {
			return n
		}
	}
	switch v := v.(type) {
	case map[string]any:
		return c.object(n, s, v)
	case []any:
		return c.array(n, s, v)
	}
	return n
}

func (c *costs) object(n int, s *jsonschema.Schema, obj map[string]any) int {
	for _, dep := range s.Dependencies {
		if sub, ok := dep.(*jsonschema.Schema); ok {
			n = c.add(n, c.cost(sub, obj))
		}
	}
	for _, sub := range s.DependentSchemas {
		n = c.add(n, c.cost(sub, obj))
	}
	additional, _ := s.AdditionalProperties.(*jsonschema.Schema)
	for name, member := range obj {
		if n > c.limit {
			return n
		}
		n = c.add(n, c.cost(s.Properties[name], member))
		n = c.add(n, len(s.PatternProperties))
		for _, sub := range s.PatternProperties {
			n = c.add(n, c.cost(sub, member)) // as if every pattern matched
		}
		n = c.add(n, c.cost(additional, member))
		n = c.add(n, c.cost(s.UnevaluatedProperties, member))
		n = c.add(n, c.cost(s.PropertyNames, name))
	}
	return n
}

func (c *costs) array(n int, s *jsonschema.Schema, arr []any) int {
	if s.UniqueItems {
		n = c.add(n, len(arr)*(len(arr)-1)/2)
	}
	items, _ := s.Items.(*jsonschema.Schema)
	tuple, _ := s.Items.([]*jsonschema.Schema)
	additional, _ := s.AdditionalItems.(*jsonschema.Schema)
	for i, item := range arr {
		if n > c.limit {
			return n
		}
		for _, sub := range []*jsonschema.Schema{items, additional, s.Items2020, s.Contains, s.UnevaluatedItems} {
			n = c.add(n, c.cost(sub, item))
		}
		if i < len(tuple) {
			n = c.add(n, c.cost(tuple[i], item))
		}
		if i < len(s.PrefixItems) {
			n = c.add(n, c.cost(s.PrefixItems[i], item))
		}
	}
	return n
}

// identity tells objects and arrays apart (two empty ones may share one,
// and cost the same); scalars of one type all cost the same against one
// schema: the bound depends on their type alone.
func identity(v any) uintptr {
	switch v.(type) {
	case map[string]any, []any:
		return uintptr(reflect.ValueOf(v).UnsafePointer())
	case string:
		return 1
	case json.Number:
		return 2
	case bool:
		return 3
	}
	return 4
}

// typeMay reports whether v may be of one of s's types (a number is taken
// as possibly an integer).
func typeMay(s *jsonschema.Schema, v any) bool {
	var types []string
	switch v.(type) {
	case map[string]any:
		types = []string{"object"}
	case []any:
		types = []string{"array"}
	case string:
		types = []string{"string"}
	case json.Number:
		types = []string{"number", "integer"}
	case bool:
		types = []string{"boolean"}
	case nil:
		types = []string{"null"}
	}
	for _, t := range s.Types.ToStrings() {
		for _, have := range types {
			if t == have {
				return true
			}
		}
	}
	return false
}
