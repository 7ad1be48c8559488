package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// decodeJSON parses a payload into the values jsonschema validates
// (map[string]any, []any, string, json.Number, bool, nil), the values
// jsonschema.UnmarshalJSON (encoding/json with UseNumber) gives, at about
// half its cost: every event under a contract pays it on the publishing
// path. json.Valid checks the syntax without allocating; the tree is then
// built in one pass that need not check again, with plain strings taken as
// they are and escaped or non-ASCII ones left to encoding/json.
func decodeJSON(data []byte) (any, error) {
	// The errors say where, by byte offset, and never quote the payload
	// (they reach logs and dead letters' headers): encoding/json's own
	// quote a character of it.
	if !json.Valid(data) {
		var v any
		var serr *json.SyntaxError
		if err := json.Unmarshal(data, &v); errors.As(err, &serr) {
			return nil, fmt.Errorf("payload is not JSON: syntax error at byte %d", serr.Offset)
		}
		return nil, errors.New("payload is not JSON")
	}
	p := parser{data: data, huge: -1}
	v := p.value()
	if p.huge >= 0 {
		return nil, fmt.Errorf("payload has a number at byte %d with an exponent beyond ±%d or more than %d digits, which outbox-cdc does not validate (math/big's time to read one grows with its size)", p.huge, maxExponent, maxDigits)
	}
	return v, nil
}

// maxExponent bounds the decimal exponent of a payload's numbers under a
// contract: jsonschema compares numbers as math/big.Rat, which takes ~20 ms
// to read 1e1000000, so a payload made of such numbers could hold the
// publishing path for minutes. No event needs one beyond float64's ±308.
const maxExponent = 1000

// maxDigits bounds the digits of a payload number's mantissa under a
// contract, for the same reason: reading n digits takes time in n², 1.5 s
// for a million. float64 and int64 need at most 17 and 19.
const maxDigits = 1000

// hugeExponent reports whether lit, a JSON number, has an exponent beyond
// ±maxExponent or more than maxDigits digits before it.
func hugeExponent(lit []byte) bool {
	i := bytes.IndexAny(lit, "eE")
	if i < 0 {
		return len(lit) > maxDigits+2 // a sign and a point
	}
	if i > maxDigits+2 {
		return true
	}
	exp := 0
	for _, c := range lit[i+1:] {
		if c >= '0' && c <= '9' {
			if exp = exp*10 + int(c-'0'); exp > maxExponent {
				return true
			}
		}
	}
	return false
}

// parser builds the tree of a JSON text json.Valid accepted.
type parser struct {
	data []byte
	i    int
	huge int // the offset of a number with an exponent beyond maxExponent; -1: none
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() any {
	p.space()
	switch p.data[p.i] {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		return p.str()
	case 't':
		p.i += len("true")
		return true
	case 'f':
		p.i += len("false")
		return false
	case 'n':
		p.i += len("null")
		return nil
	}
	return p.number()
}

func (p *parser) object() map[string]any {
	m := map[string]any{}
	p.i++ // {
	p.space()
	if p.data[p.i] == '}' {
		p.i++
		return m
	}
	for {
		p.space()
		k := p.str()
		p.space()
		p.i++ // the colon
		// A repeated key: the last wins, as in encoding/json.
		m[k] = p.value()
		p.space()
		p.i++ // , or }
		if p.data[p.i-1] == '}' {
			return m
		}
	}
}

func (p *parser) array() []any {
	a := []any{}
	p.i++ // [
	p.space()
	if p.data[p.i] == ']' {
		p.i++
		return a
	}
	for {
		a = append(a, p.value())
		p.space()
		p.i++ // , or ]
		if p.data[p.i-1] == ']' {
			return a
		}
	}
}

func (p *parser) str() string {
	start := p.i
	p.i++ // "
	escaped, ascii := false, true
	for {
		switch c := p.data[p.i]; {
		case c == '"':
			p.i++
			if s := p.data[start+1 : p.i-1]; !escaped && (ascii || utf8.Valid(s)) {
				return string(s)
			}
			// Escapes, or bytes that are not UTF-8 (encoding/json makes
			// them U+FFFD): as encoding/json reads them.
			var s string
			_ = json.Unmarshal(p.data[start:p.i], &s)
			return s
		case c == '\\':
			escaped = true
			p.i += 2
		case c >= utf8.RuneSelf:
			ascii = false
			p.i++
		default:
			p.i++
		}
	}
}

func (p *parser) number() json.Number {
	start := p.i
	for p.i < len(p.data) && numberByte(p.data[p.i]) {
		p.i++
	}
	lit := p.data[start:p.i]
	if hugeExponent(lit) && p.huge < 0 {
		p.huge = start
	}
	return json.Number(lit)
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
