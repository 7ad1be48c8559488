package contract

import (
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// A violation's message goes to a WARN log and to a dead letter's
// outbox_cdc.error header, where whoever reads logs or the dead-letter
// topic's headers reads it: it must not carry what the payload holds (a
// card number that fails a pattern). So it names the rule that failed,
// with what the contract itself says (a pattern, an enum, a bound: the
// contract is configuration), never the payload's value, its length or
// count, nor a property name the payload chose. jsonschema's own messages
// quote the value ("'4111…' does not match pattern"); rule writes its
// own for those, and for a kind it does not know says only which keyword
// failed.

// rule is what failed, for people, without the payload's content.
func rule(e *jsonschema.OutputError) string {
	switch k := e.Kind.(type) {
	case *kind.Type, *kind.Enum, *kind.Const, *kind.Required, *kind.Dependency, *kind.DependentRequired,
		*kind.UniqueItems, *kind.MinContains, *kind.MaxContains, *kind.AdditionalItems, *kind.FalseSchema,
		*kind.Not, *kind.AllOf, *kind.AnyOf, *kind.OneOf, *kind.Group, *kind.Reference, *kind.Contains,
		*kind.ContentSchema, *kind.RefCycle:
		// Type's got is a JSON type; the others say only what the
		// contract holds (enum and const values, required names) or
		// where (item indexes).
		return e.String()
	case *kind.Pattern:
		return fmt.Sprintf("does not match pattern %s", strconv.Quote(k.Want))
	case *kind.Format:
		return fmt.Sprintf("not a valid %s (format)", k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("shorter than minLength %d", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("longer than maxLength %d", k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("fewer items than minItems %d", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("more items than maxItems %d", k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("fewer properties than minProperties %d", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("more properties than maxProperties %d", k.Want)
	case *kind.Minimum:
		return "less than minimum " + number(k.Want)
	case *kind.Maximum:
		return "greater than maximum " + number(k.Want)
	case *kind.ExclusiveMinimum:
		return "not greater than exclusiveMinimum " + number(k.Want)
	case *kind.ExclusiveMaximum:
		return "not less than exclusiveMaximum " + number(k.Want)
	case *kind.MultipleOf:
		return "not a multiple of multipleOf " + number(k.Want)
	case *kind.AdditionalProperties:
		// The names are the payload's: counted, not quoted.
		return fmt.Sprintf("%d properties not allowed (additionalProperties)", len(k.Properties))
	case *kind.PropertyNames:
		return "a property name does not meet propertyNames"
	case *kind.ContentEncoding:
		return fmt.Sprintf("not %s encoded (contentEncoding)", k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("not of media type %s (contentMediaType)", k.Want)
	}
	if path := e.Kind.KeywordPath(); len(path) > 0 {
		return fmt.Sprintf("%s failed", strings.Join(path, "/"))
	}
	return "validation failed"
}

// number is a contract's bound as a short decimal.
func number(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// contractPointer is instance, the failing value's JSON Pointer, with each
// property name the contract does not name written "*": a name matched by
// additionalProperties, patternProperties, unevaluatedProperties or a
// mismatch is the payload's own content (an e-mail address as a map's key).
// It walks keyword, the failing keyword's location from the contract's
// root, beside it: "properties/NAME" steps into NAME, the item keywords
// into an index, the property keywords into a name the payload chose, and
// the other applicators ($ref, allOf/N, not, if…) stay on the same value.
// Whatever it cannot account for is written "*" too.
func contractPointer(instance, keyword string) string {
	if instance == "" {
		return ""
	}
	inst := strings.Split(instance[1:], "/")
	kw := strings.Split(strings.TrimPrefix(keyword, "/"), "/")
	j := 0 // the next instance token
	next := func(i int) string {
		if i+1 < len(kw) {
			return kw[i+1]
		}
		return ""
	}
	for i := 0; i < len(kw) && j < len(inst); i++ {
		switch kw[i] {
		case "properties":
			if i++; i >= len(kw) || unescape(kw[i]) != inst[j] {
				inst[j] = "*"
			}
			j++
		case "patternProperties":
			i++ // the pattern
			fallthrough
		case "additionalProperties", "unevaluatedProperties":
			inst[j] = "*"
			j++
		case "items", "prefixItems", "additionalItems", "unevaluatedItems", "contains":
			if digits(next(i)) { // a tuple's position (items/0, prefixItems/0)
				i++
			}
			if !digits(inst[j]) {
				inst[j] = "*"
			}
			j++
		case "allOf", "anyOf", "oneOf", "dependentSchemas", "dependencies", "$defs", "definitions":
			i++ // an index or a name of the contract's
		}
	}
	for ; j < len(inst); j++ {
		inst[j] = "*"
	}
	return "/" + strings.Join(inst, "/")
}

// unescape is a keyword location's token as an instance location writes
// it: the keyword's is URL-encoded ("a%20b").
func unescape(tok string) string {
	if u, err := url.PathUnescape(tok); err == nil {
		return u
	}
	return tok
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
