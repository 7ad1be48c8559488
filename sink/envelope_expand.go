package sink

import (
	"bytes"
	"encoding/json"
)

// expander infers a Kafka Connect schema from a JSON payload, for
// connect-json with Config.ConnectExpandPayload (Debezium's
// table.expand.json.payload). The rules:
//   - an object is a struct, its members its fields in their order; every
//     field is optional, so that null fits anywhere;
//   - an array is an array of its first element's schema, which every
//     other element must share: the same type (int64 and float64 mix into
//     float64, null fits any), and for objects the same keys in the same
//     order (jsonb always orders them) with shared schemas in turn;
//   - a number is int64 when written without fraction or exponent and
//     within int64's range, else float64 (Connect's FLOAT64, which
//     JsonConverter's schemas call "double"); a string is a string, true and
//     false a boolean;
//   - null, where nothing else tells its type (a member null in every
//     element, an array of nulls only), is an optional string.
//
// A payload that breaks them is not expanded, and its event goes with the
// payload as a string, as without expansion (its schema says so): an empty
// array (its element type unknown) that no other element fills in, an
// array whose elements differ (heterogeneous), a top-level null, an object
// with an empty or duplicate key (Connect refuses such field names), or
// nesting deeper than maxExpandDepth (Jackson, JsonConverter's parser,
// caps a document's nesting at 1000, and each level costs the schema two).
// A payload whose expanded envelope would be larger than
// --max-message-bytes goes as a string too (see maxNodes and limit).
// A consumer of such a topic sees two schemas for the payload field.
//
// Its memory is bounded by the schema, not by the payload: an array's
// elements after the first are merged into the first's schema and their
// nodes dropped (unless the merge adopted some, see merge), so that
// [0,0,…] holds two nodes however long it is.
type expander struct {
	doc   []byte // the payload, compacted: no white space to skip
	pos   int
	nodes []node
	// maxNodes bounds nodes: each node is at least minSchemaBytes of the
	// schema written, so more than the envelope's room allows cannot fit.
	maxNodes int
	// limit bounds the envelope written by appendSchema.
	limit int
	// adopted says merge made a node of the merged value part of the
	// schema, which must then keep it.
	adopted bool
}

// minSchemaBytes is the least a node's schema takes:
// {"type":"int64","optional":true}.
const minSchemaBytes = 32

// maxExpandDepth bounds the payload's nesting when expanded.
const maxExpandDepth = 64

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindInt
	kindFloat
	kindString
	kindArray
	kindStruct
)

// connectTypes are the Connect schema types of scalar kinds, each closing
// the type's quote.
var connectTypes = [...]string{kindNull: `string"`, kindBool: `boolean"`, kindInt: `int64"`, kindFloat: `double"`, kindString: `string"`}

// node is one inferred schema, in expander.nodes; nodes refer to each other
// by index, so that one slice, reused across events, holds them all.
type node struct {
	kind  kind
	name  []byte // a struct field's key, its JSON string token in doc
	child int32  // struct: its first field; array: its element's schema; -1: none
	next  int32  // the next field of the same struct; -1: none
}

// infer parses doc, compacted valid JSON, into nodes and returns the root's
// schema; ok is false where the rules above refuse to expand.
func (x *expander) infer(doc []byte) (root int32, ok bool) {
	x.doc, x.pos, x.nodes = doc, 0, x.nodes[:0]
	root, ok = x.value(0)
	return root, ok && x.nodes[root].kind != kindNull
}

func (x *expander) add(k kind) int32 {
	x.nodes = append(x.nodes, node{kind: k, child: -1, next: -1})
	return int32(len(x.nodes) - 1)
}

func (x *expander) value(depth int) (int32, bool) {
	if depth > maxExpandDepth || len(x.nodes) >= x.maxNodes {
		return -1, false
	}
	switch x.doc[x.pos] {
	case '{':
		return x.object(depth)
	case '[':
		return x.array(depth)
	case '"':
		x.skipString()
		return x.add(kindString), true
	case 't':
		x.pos += len("true")
		return x.add(kindBool), true
	case 'f':
		x.pos += len("false")
		return x.add(kindBool), true
	case 'n':
		x.pos += len("null")
		return x.add(kindNull), true
	}
	return x.add(x.number()), true
}

// skipString moves past the string token at pos.
func (x *expander) skipString() {
	for x.pos++; ; x.pos++ {
		switch x.doc[x.pos] {
		case '\\':
			x.pos++ // the escaped byte (\u's hex digits are plain bytes)
		case '"':
			x.pos++
			return
		}
	}
}

// number moves past the number token at pos and returns its kind.
func (x *expander) number() kind {
	start, integer := x.pos, true
	for ; x.pos < len(x.doc); x.pos++ {
		switch c := x.doc[x.pos]; {
		case c >= '0' && c <= '9', c == '-':
		case c == '.', c == 'e', c == 'E', c == '+':
			integer = false
		default:
			return numberKind(x.doc[start:x.pos], integer)
		}
	}
	return numberKind(x.doc[start:], integer)
}

func numberKind(tok []byte, integer bool) kind {
	if integer && fitsInt64(tok) {
		return kindInt
	}
	return kindFloat
}

// fitsInt64 says whether an integer token (JSON: no leading zeros) is in
// int64's range.
func fitsInt64(tok []byte) bool {
	limit := "9223372036854775807"
	if tok[0] == '-' {
		tok, limit = tok[1:], "9223372036854775808"
	}
	return len(tok) < len(limit) || len(tok) == len(limit) && string(tok) <= limit
}

func (x *expander) object(depth int) (int32, bool) {
	s := x.add(kindStruct)
	x.pos++ // {
	if x.doc[x.pos] == '}' {
		x.pos++
		return s, true
	}
	for last := int32(-1); ; {
		start := x.pos
		x.skipString()
		key := x.doc[start:x.pos]
		x.pos++ // :
		f, ok := x.value(depth + 1)
		if !ok {
			return -1, false
		}
		x.nodes[f].name = key
		if last < 0 {
			x.nodes[s].child = f
		} else {
			x.nodes[last].next = f
		}
		last = f
		x.pos++ // , or }
		if x.doc[x.pos-1] == '}' {
			return s, x.uniqueNames(s)
		}
	}
}

func (x *expander) array(depth int) (int32, bool) {
	a := x.add(kindArray)
	x.pos++ // [
	if x.doc[x.pos] == ']' {
		x.pos++
		return a, true
	}
	for {
		mark := len(x.nodes)
		e, ok := x.value(depth + 1)
		if !ok {
			return -1, false
		}
		if elem := x.nodes[a].child; elem < 0 {
			x.nodes[a].child = e
		} else {
			x.adopted = false
			if !x.merge(elem, e) {
				return -1, false
			}
			if !x.adopted { // e's nodes are no part of the schema
				x.nodes = x.nodes[:mark]
			}
		}
		x.pos++ // , or ]
		if x.doc[x.pos-1] == ']' {
			return a, true
		}
	}
}

// merge makes a the schema that fits both a's values and b's, or says that
// none does.
func (x *expander) merge(a, b int32) bool {
	na, nb := x.nodes[a], x.nodes[b]
	switch {
	case nb.kind == kindNull:
		return true
	case na.kind == kindNull:
		x.nodes[a].kind, x.nodes[a].child = nb.kind, nb.child
		x.adopted = x.adopted || nb.child >= 0
		return true
	case na.kind == nb.kind && na.kind < kindArray:
		return true
	case (na.kind == kindInt || na.kind == kindFloat) && (nb.kind == kindInt || nb.kind == kindFloat):
		x.nodes[a].kind = kindFloat
		return true
	case na.kind != nb.kind:
		return false
	case na.kind == kindArray:
		switch {
		case nb.child < 0:
			return true
		case na.child < 0:
			x.nodes[a].child = nb.child
			x.adopted = true
			return true
		}
		return x.merge(na.child, nb.child)
	}
	fa, fb := na.child, nb.child // structs: the same keys in the same order
	for ; fa >= 0 && fb >= 0; fa, fb = x.nodes[fa].next, x.nodes[fb].next {
		if !bytes.Equal(x.nodes[fa].name, x.nodes[fb].name) || !x.merge(fa, fb) {
			return false
		}
	}
	return fa < 0 && fb < 0
}

// uniqueNames says whether struct s's field names are all non-empty and
// distinct, as Connect's SchemaBuilder wants them.
func (x *expander) uniqueNames(s int32) bool {
	n, escaped := 0, false
	for f := x.nodes[s].child; f >= 0; f = x.nodes[f].next {
		name := x.nodes[f].name
		if len(name) == len(`""`) {
			return false
		}
		escaped = escaped || bytes.IndexByte(name, '\\') >= 0
		n++
	}
	if escaped || n > 16 {
		return x.uniqueDecoded(s, n)
	}
	for f := x.nodes[s].child; f >= 0; f = x.nodes[f].next {
		for g := x.nodes[f].next; g >= 0; g = x.nodes[g].next {
			if bytes.Equal(x.nodes[f].name, x.nodes[g].name) {
				return false
			}
		}
	}
	return true
}

// uniqueDecoded compares the names as decoded: "a" and "\u0061" are one.
func (x *expander) uniqueDecoded(s int32, n int) bool {
	seen := make(map[string]bool, n)
	for f := x.nodes[s].child; f >= 0; f = x.nodes[f].next {
		var name string
		if err := json.Unmarshal(x.nodes[f].name, &name); err != nil || name == "" || seen[name] {
			return false
		}
		seen[name] = true
	}
	return true
}

// appendSchema appends node n's schema in JsonConverter's form, as the
// field named by the JSON string field when it is not nil; ok is false for
// an array whose element type is unknown, or once dst is longer than
// limit.
func (x *expander) appendSchema(dst []byte, n int32, field []byte) (_ []byte, ok bool) {
	if len(dst) > x.limit {
		return dst, false
	}
	nd := x.nodes[n]
	dst = append(dst, `{"type":"`...)
	switch nd.kind {
	case kindStruct:
		dst = append(dst, `struct","fields":[`...)
		for f := nd.child; f >= 0; f = x.nodes[f].next {
			if f != nd.child {
				dst = append(dst, ',')
			}
			if dst, ok = x.appendSchema(dst, f, x.nodes[f].name); !ok {
				return dst, false
			}
		}
		dst = append(dst, ']')
	case kindArray:
		if nd.child < 0 {
			return dst, false
		}
		dst = append(dst, `array","items":`...)
		if dst, ok = x.appendSchema(dst, nd.child, nil); !ok {
			return dst, false
		}
	default:
		dst = append(dst, connectTypes[nd.kind]...)
	}
	dst = append(dst, `,"optional":true`...)
	if field != nil {
		dst = append(dst, `,"field":`...)
		dst = append(dst, field...)
	}
	return append(dst, '}'), true
}
