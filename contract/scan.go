package contract

import (
	"encoding/json"
	"unicode/utf8"
)

// maxDepth bounds the nesting the screen follows; deeper payloads are left
// to jsonschema (encoding/json's own bound is 10000).
const maxDepth = 1000

// passes reports whether payload surely meets the contract: valid JSON
// (RFC 8259, as strict as json.Valid) whose value the screen accepts.
func (sc *screen) passes(payload []byte) bool {
	s := scanner{b: payload, budget: 16*len(payload) + 1024}
	if !s.check(sc.root) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// scanner reads one payload; each method returns false as soon as the
// payload is not surely valid, and the screen then gives up on it.
type scanner struct {
	b     []byte
	i     int
	depth int
	// budget bounds the values checked: $ref, allOf and anyOf read a value
	// again, and anyOf over a recursive schema could do so exponentially
	// often. Spent, the screen gives up and jsonschema decides.
	budget int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// check reads the value at s.i and reports whether it meets n, $ref,
// allOf and anyOf included (each read again from the value's start).
func (s *scanner) check(n *node) bool {
	if s.budget--; s.budget < 0 {
		return false
	}
	s.space()
	start := s.i
	switch {
	case n.verdict < 0:
		return false
	case n.verdict > 0:
		return s.own(anything)
	case !s.own(n):
		return false
	}
	end := s.i
	for _, r := range n.refs {
		if s.i = start; !s.check(r) {
			return false
		}
	}
	if len(n.anyOf) > 0 {
		one := false
		for _, a := range n.anyOf {
			if s.i = start; s.check(a) {
				one = true
				break
			}
		}
		if !one {
			return false
		}
	}
	s.i = end
	return true
}

// own reads the value at s.i against n's own keywords.
func (s *scanner) own(n *node) bool {
	if s.i >= len(s.b) {
		return false
	}
	if c := s.b[s.i]; c != '"' && n.strs != nil {
		return false // enum or const: a value that is not a string is left to jsonschema
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return n.allows(tObject) && s.object(n)
	case c == '[':
		return n.allows(tArray) && s.array(n)
	case c == '"':
		return n.allows(tString) && s.str(n)
	case c == 't':
		return n.allows(tBool) && s.literal("true")
	case c == 'f':
		return n.allows(tBool) && s.literal("false")
	case c == 'n':
		return n.allows(tNull) && s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number(n)
	}
	return false
}

func (n *node) allows(t uint8) bool { return n.types == 0 || n.types&t != 0 }

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *scanner) object(n *node) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.i++ // {
	var seen uint64
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return n.allReq == 0
	}
	for {
		s.space()
		key, ok := s.key()
		if s.space(); !ok || s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		sub, named := n.props[string(key)]
		if !named {
			sub = n.additional
		}
		if sub == nil {
			sub = anything
		}
		if !s.check(sub) {
			return false
		}
		seen |= n.required[string(key)]
		if s.space(); s.i >= len(s.b) {
			return false
		}
		s.i++
		switch s.b[s.i-1] {
		case ',':
		case '}':
			return seen&n.allReq == n.allReq
		default:
			return false
		}
	}
}

func (s *scanner) array(n *node) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.i++ // [
	items := n.items
	if items == nil {
		items = anything
	}
	count := 0
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return n.counts(0)
	}
	for {
		if !s.check(items) {
			return false
		}
		count++
		if s.space(); s.i >= len(s.b) {
			return false
		}
		s.i++
		switch s.b[s.i-1] {
		case ',':
		case ']':
			return n.counts(count)
		default:
			return false
		}
	}
}

func (n *node) counts(items int) bool {
	return items >= n.minItems && (n.maxItems < 0 || items <= n.maxItems)
}

// key reads an object's key: its bytes, decoded when it has escapes or
// bytes that are not UTF-8 (then as encoding/json reads them).
func (s *scanner) key() ([]byte, bool) {
	raw, plain, ok := s.quoted()
	if !ok || plain {
		return raw, ok
	}
	return []byte(decodeString(s.b[s.i-len(raw)-2 : s.i])), true
}

// str reads a string and checks it against enum, const, the length bounds
// and pattern.
func (s *scanner) str(n *node) bool {
	raw, plain, ok := s.quoted()
	if !ok {
		return false
	}
	if n.strs == nil && n.minLen == 0 && n.maxLen < 0 && n.pattern == nil {
		return true
	}
	var v string
	if plain {
		v = string(raw)
	} else {
		v = decodeString(s.b[s.i-len(raw)-2 : s.i])
	}
	if n.strs != nil && !has(n.strs, v) {
		return false
	}
	if n.minLen > 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(v)
		if l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return false
		}
	}
	return n.pattern == nil || n.pattern.MatchString(v)
}

// quoted reads a string's syntax, returning what is between the quotes and
// whether that is the string itself (no escape, UTF-8).
func (s *scanner) quoted() (raw []byte, plain, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	escaped, ascii := false, true
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			raw = s.b[start:i]
			return raw, !escaped && (ascii || utf8.Valid(raw)), true
		case c == '\\':
			escaped = true
			if i+1 >= len(s.b) {
				return nil, false, false
			}
			i++
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) || !isHex(s.b[i+1]) || !isHex(s.b[i+2]) || !isHex(s.b[i+3]) || !isHex(s.b[i+4]) {
					return nil, false, false
				}
				i += 4
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// decodeString is a quoted JSON string, which quoted accepted, as
// encoding/json reads it.
func decodeString(quoted []byte) string {
	var v string
	_ = json.Unmarshal(quoted, &v)
	return v
}

// number reads a number (RFC 8259's grammar) and checks its type and
// bounds; a non-integral literal where only integers pass (1.0 is one) is
// left to jsonschema.
func (s *scanner) number(n *node) bool {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	integer := true
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if integer = false; s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if integer = false; s.digits() == 0 {
			return false
		}
	}
	if !n.allows(tNumber) && !(integer && n.allows(tInteger)) {
		return false
	}
	lit := s.b[start:s.i]
	if hugeExponent(lit) {
		return false // refused by decodeJSON
	}
	for _, b := range n.bounds {
		if !b.holds(lit, integer) {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}
