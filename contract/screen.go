package contract

import (
	"math"
	"math/big"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A screen is a contract's fast path. jsonschema validates a decoded tree,
// and its validator allocates for every value and parses every number as a
// big.Rat: ~12 µs for a 300-byte payload, more than the rest of the
// publishing path. The screen checks the payload's bytes in one pass
// against the same compiled schema, for the keywords event contracts use
// most (type, enum and const of strings, properties, required,
// additionalProperties, items, the length and number bounds, pattern,
// $ref, allOf, anyOf), allocating little. It only ever says "valid" when
// jsonschema would: for anything else (a failure, a keyword it does not
// know, a number it cannot compare cheaply, JSON that is not valid)
// jsonschema decides and locates the failure. A contract with a keyword
// the screen does not know anywhere in it has no screen.
type screen struct{ root *node }

// node is one compiled schema, as the screen checks it.
type node struct {
	verdict int8  // 1: every value passes (true, {}); -1: none does (false); 0: check
	types   uint8 // of the t* bits; 0: any type
	// refs ($ref, allOf) must each pass too; one of anyOf must.
	refs, anyOf []*node
	strs        map[string]struct{} // enum and const: non-nil, only these strings pass

	props      map[string]*node
	required   map[string]uint64 // each required property's bit
	allReq     uint64
	additional *node // properties not in props; nil: any

	items              *node // nil: any
	minItems, maxItems int   // maxItems -1: none
	minLen, maxLen     int   // maxLen -1: none
	pattern            jsonschema.Regexp
	bounds             []bound
}

// JSON types, as bits of node.types.
const (
	tNull uint8 = 1 << iota
	tBool
	tNumber
	tInteger
	tString
	tArray
	tObject
)

var typeBits = map[string]uint8{"null": tNull, "boolean": tBool, "number": tNumber, "integer": tInteger,
	"string": tString, "array": tArray, "object": tObject}

// bound is one of minimum, maximum, exclusiveMinimum, exclusiveMaximum.
type bound struct {
	rat     *big.Rat
	small   int64 // rat, when it is an integer that fits (exact)
	exact   bool
	min     bool // a lower bound
	orEqual bool // minimum and maximum; not the exclusive ones
}

func newNode() *node { return &node{maxItems: -1, maxLen: -1} }

// anything passes every value: the screen skips a value through it,
// checking its syntax alone.
var anything = newNode()

// newScreen compiles s's screen; nil when s uses a keyword the screen does
// not know.
func newScreen(s *jsonschema.Schema) *screen {
	c := screenCompiler{nodes: map[*jsonschema.Schema]*node{}}
	root := c.node(s)
	if c.unknown || loops(root, map[*node]int8{}) {
		return nil
	}
	return &screen{root: root}
}

// loops reports whether n reaches itself through $ref, allOf and anyOf
// alone, without going into the payload ({"$ref": "#"}): the screen would
// never end; jsonschema reports the cycle. state: 1 on the path, 2 done.
func loops(n *node, state map[*node]int8) bool {
	switch state[n] {
	case 1:
		return true
	case 2:
		return false
	}
	state[n] = 1
	for _, next := range append(n.refs[:len(n.refs):len(n.refs)], n.anyOf...) {
		if loops(next, state) {
			return true
		}
	}
	state[n] = 2
	return false
}

type screenCompiler struct {
	nodes   map[*jsonschema.Schema]*node // compiled already, or being: $ref cycles
	unknown bool                         // a keyword the screen does not know
}

func (c *screenCompiler) node(s *jsonschema.Schema) *node {
	if n, ok := c.nodes[s]; ok {
		return n
	}
	n := newNode()
	c.nodes[s] = n
	switch {
	case s.Bool != nil && *s.Bool:
		n.verdict = 1
		return n
	case s.Bool != nil:
		n.verdict = -1
		return n
	case !screenable(s):
		c.unknown = true
		return n
	}
	if s.Ref != nil {
		n.refs = append(n.refs, c.node(s.Ref))
	}
	for _, sub := range s.AllOf {
		n.refs = append(n.refs, c.node(sub))
	}
	for _, sub := range s.AnyOf {
		n.anyOf = append(n.anyOf, c.node(sub))
	}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			n.types |= typeBits[t]
		}
	}
	c.values(n, s)
	c.object(n, s)
	c.array(n, s)
	if s.MinLength != nil {
		n.minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		n.maxLen = *s.MaxLength
	}
	n.pattern = s.Pattern
	for _, b := range []struct {
		rat          *big.Rat
		min, orEqual bool
	}{{s.Minimum, true, true}, {s.Maximum, false, true}, {s.ExclusiveMinimum, true, false}, {s.ExclusiveMaximum, false, false}} {
		if b.rat != nil {
			n.bounds = append(n.bounds, newBound(b.rat, b.min, b.orEqual))
		}
	}
	return n
}

// values compiles enum and const: their strings; a value of another type
// leaves the payload to jsonschema.
func (c *screenCompiler) values(n *node, s *jsonschema.Schema) {
	var lists [][]any
	if s.Enum != nil {
		lists = append(lists, s.Enum.Values)
	}
	if s.Const != nil {
		lists = append(lists, []any{*s.Const})
	}
	for _, list := range lists {
		strs := map[string]struct{}{}
		for _, v := range list {
			if str, ok := v.(string); ok && (n.strs == nil || has(n.strs, str)) {
				strs[str] = struct{}{}
			}
		}
		n.strs = strs // with both, the strings in both
	}
}

func has(m map[string]struct{}, k string) bool { _, ok := m[k]; return ok }

func (c *screenCompiler) object(n *node, s *jsonschema.Schema) {
	if len(s.Properties) > 0 {
		n.props = map[string]*node{}
		for name, sub := range s.Properties {
			n.props[name] = c.node(sub)
		}
	}
	if len(s.Required) > 0 {
		n.required = map[string]uint64{}
		for _, name := range s.Required {
			if _, ok := n.required[name]; !ok { // a name listed twice keeps one bit
				bit := uint64(1) << len(n.required)
				n.required[name] = bit
				n.allReq |= bit
			}
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		if !a {
			n.additional = &node{verdict: -1}
		}
	case *jsonschema.Schema:
		n.additional = c.node(a)
	}
}

func (c *screenCompiler) array(n *node, s *jsonschema.Schema) {
	if s.MinItems != nil {
		n.minItems = *s.MinItems
	}
	if s.MaxItems != nil {
		n.maxItems = *s.MaxItems
	}
	switch {
	case s.Items2020 != nil:
		n.items = c.node(s.Items2020)
	case s.DraftVersion < 2020 && s.Items != nil:
		if items, ok := s.Items.(*jsonschema.Schema); ok {
			n.items = c.node(items)
		}
	}
}

// screenable reports whether the screen knows every keyword s has (see
// TestScreenKnowsEverySchemaField, which fails when a new version of
// jsonschema adds one).
func screenable(s *jsonschema.Schema) bool {
	_, tuple := s.Items.([]*jsonschema.Schema)
	return s.RecursiveRef == nil && s.DynamicRef == nil && s.Not == nil && len(s.OneOf) == 0 &&
		s.If == nil && s.Then == nil && s.Else == nil && s.Format == nil &&
		s.MaxProperties == nil && s.MinProperties == nil && s.PropertyNames == nil && len(s.PatternProperties) == 0 &&
		len(s.Dependencies) == 0 && len(s.DependentRequired) == 0 && len(s.DependentSchemas) == 0 &&
		s.UnevaluatedProperties == nil && s.UnevaluatedItems == nil && !s.UniqueItems &&
		s.Contains == nil && s.MinContains == nil && s.MaxContains == nil && !tuple && s.AdditionalItems == nil &&
		len(s.PrefixItems) == 0 && s.ContentEncoding == nil && s.ContentMediaType == nil && s.ContentSchema == nil &&
		s.MultipleOf == nil && len(s.Extensions) == 0 && len(s.Required) <= 64
}

func newBound(r *big.Rat, min, orEqual bool) bound {
	b := bound{rat: r, min: min, orEqual: orEqual}
	if r.IsInt() && r.Num().IsInt64() {
		b.small, b.exact = r.Num().Int64(), true
	}
	return b
}

// holds reports whether the number lit (JSON number syntax; integer: no
// fraction nor exponent) meets b, comparing as jsonschema does: exactly.
func (b bound) holds(lit []byte, integer bool) bool {
	var cmp int
	if v, ok := smallInt(lit, integer); ok && b.exact {
		cmp = compareInt(v, b.small)
	} else {
		r, ok := new(big.Rat).SetString(string(lit))
		if !ok {
			return false
		}
		cmp = r.Cmp(b.rat)
	}
	switch {
	case cmp == 0:
		return b.orEqual
	case b.min:
		return cmp > 0
	}
	return cmp < 0
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// smallInt is lit's value when it is an integer of at most 18 digits.
func smallInt(lit []byte, integer bool) (int64, bool) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if !integer || len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var v int64
	for _, d := range digits {
		v = v*10 + int64(d-'0')
	}
	if lit[0] == '-' {
		v = -v
	}
	return v, v > math.MinInt64
}
