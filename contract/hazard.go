package contract

import (
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxInPlace is how many schemas a contract may apply to one value before
// check warns: the validator evaluates each, for every value they apply
// to.
const maxInPlace = 10_000

// Hazards names the contracts whose check can be costly, by event type,
// saying why: where they can take time exponential in a payload's nesting
// (several branches of anyOf, oneOf or allOf that lead back to the same
// schema through the payload), or apply very many schemas to one value
// (combinators nested in combinators). It is what it can tell from the
// contract alone: the budget still bounds every payload (see budget.go);
// a payload over it is dead-lettered.
func (s *Set) Hazards() map[string]string {
	hazards := map[string]string{}
	for t, c := range s.contracts {
		var why []string
		g := newGraph(c.schema)
		for _, n := range g.order {
			if k := g.branching(n); k >= 2 {
				why = append(why, fmt.Sprintf("%s applies %d branches that each lead back to it through the payload: checking can take time exponential in the payload's nesting", s.short(n.Location), k))
			}
		}
		if n := inPlace(c.schema, map[*jsonschema.Schema]int{}); n > maxInPlace {
			why = append(why, fmt.Sprintf("applies over %d schemas to one value (combinators nested in combinators)", maxInPlace))
		}
		if len(why) > 0 {
			slices.Sort(why)
			hazards[t] = strings.Join(why, "; ")
		}
	}
	return hazards
}

// short is a schema's location relative to the directory.
func (s *Set) short(loc string) string { return strings.TrimPrefix(loc, s.base) }

// graph is the schemas reachable from a contract: each one's in-place
// successors (applied to the same value) and all its successors, and the
// strongly connected component each belongs to.
type graph struct {
	order []*jsonschema.Schema // in the order first reached
	same  map[*jsonschema.Schema][]*jsonschema.Schema
	all   map[*jsonschema.Schema][]*jsonschema.Schema
	comp  map[*jsonschema.Schema]int
}

func newGraph(root *jsonschema.Schema) *graph {
	g := &graph{same: map[*jsonschema.Schema][]*jsonschema.Schema{}, all: map[*jsonschema.Schema][]*jsonschema.Schema{}}
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if _, ok := g.all[s]; ok || s == nil {
			return
		}
		same, members := applied(s)
		g.order = append(g.order, s)
		g.same[s], g.all[s] = same, append(slices.Clone(same), members...)
		for _, n := range g.all[s] {
			visit(n)
		}
	}
	visit(root)
	g.components()
	return g
}

// applied is what the validator applies, besides s itself: to the same
// value, and to the value's members.
func applied(s *jsonschema.Schema) (same, members []*jsonschema.Schema) {
	if s.Bool != nil {
		return nil, nil
	}
	same = []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		same = append(same, s.DynamicRef.Ref)
	}
	same = append(append(append(same, s.AllOf...), s.AnyOf...), s.OneOf...)
	for _, dep := range s.Dependencies {
		if sub, ok := dep.(*jsonschema.Schema); ok {
			same = append(same, sub)
		}
	}
	for _, sub := range s.DependentSchemas {
		same = append(same, sub)
	}
	for _, sub := range s.Properties {
		members = append(members, sub)
	}
	for _, sub := range s.PatternProperties {
		members = append(members, sub)
	}
	additional, _ := s.AdditionalProperties.(*jsonschema.Schema)
	items, _ := s.Items.(*jsonschema.Schema)
	tuple, _ := s.Items.([]*jsonschema.Schema)
	additionalItems, _ := s.AdditionalItems.(*jsonschema.Schema)
	members = append(append(append(members, additional, s.UnevaluatedProperties, s.PropertyNames, items, additionalItems,
		s.Items2020, s.Contains, s.UnevaluatedItems), tuple...), s.PrefixItems...)
	return slices.DeleteFunc(same, isNil), slices.DeleteFunc(members, isNil)
}

func isNil(s *jsonschema.Schema) bool { return s == nil }

// components numbers the strongly connected components (Tarjan).
func (g *graph) components() {
	g.comp = map[*jsonschema.Schema]int{}
	index, low, on := map[*jsonschema.Schema]int{}, map[*jsonschema.Schema]int{}, map[*jsonschema.Schema]bool{}
	var stack []*jsonschema.Schema
	next := 0
	var connect func(v *jsonschema.Schema)
	connect = func(v *jsonschema.Schema) {
		index[v], low[v] = next, next
		next++
		stack, on[v] = append(stack, v), true
		for _, w := range g.all[v] {
			if _, seen := index[w]; !seen {
				connect(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack, on[w] = stack[:len(stack)-1], false
				g.comp[w] = index[v]
				if w == v {
					break
				}
			}
		}
	}
	for _, v := range g.order {
		if _, seen := index[v]; !seen {
			connect(v)
		}
	}
}

// branching is how many of n's in-place successors lead back to n (are in
// its component), when at least two of them may accept values of one
// type: branches each declaring types, pairwise disjoint, are told apart
// by the validator at once ({"anyOf": [{"type": "array", …}, {"type":
// "object", …}]} is linear).
func (g *graph) branching(n *jsonschema.Schema) int {
	var back []*jsonschema.Schema
	for _, s := range g.same[n] {
		if g.comp[s] == g.comp[n] && g.loops(n) {
			back = append(back, s)
		}
	}
	for i, a := range back {
		for _, b := range back[i+1:] {
			if a == b || !disjoint(a, b) {
				return len(back)
			}
		}
	}
	return 0
}

// loops reports whether n's component holds a cycle (not just n alone).
func (g *graph) loops(n *jsonschema.Schema) bool {
	for _, s := range g.all[n] {
		if g.comp[s] == g.comp[n] {
			return true
		}
	}
	return false
}

func disjoint(a, b *jsonschema.Schema) bool {
	if a.Types == nil || a.Types.IsEmpty() || b.Types == nil || b.Types.IsEmpty() {
		return false
	}
	bt := b.Types.ToStrings()
	for _, t := range a.Types.ToStrings() {
		if slices.Contains(bt, t) || t == "number" && slices.Contains(bt, "integer") || t == "integer" && slices.Contains(bt, "number") {
			return false
		}
	}
	return true
}

// inPlace is how many schemas the validator may apply to one value from
// s, through in-place keywords alone (a cycle counts once), saturating
// past maxInPlace.
func inPlace(s *jsonschema.Schema, memo map[*jsonschema.Schema]int) int {
	if n, ok := memo[s]; ok {
		return n
	}
	memo[s] = 1 // a cycle: the validator stops it
	n := 1
	same, _ := applied(s)
	for _, sub := range same {
		n = min(n+inPlace(sub, memo), maxInPlace+1)
	}
	memo[s] = n
	return n
}
