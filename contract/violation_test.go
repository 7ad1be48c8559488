package contract

import (
	"errors"
	"strings"
	"testing"
)

// secret is a payload's value that must not leave it: not in a
// violation's message, nor in its location (a log line, a dead letter's
// headers), even formatted (4.111111111111111×10¹⁵).
const secret = "4111111111111111"

// TestViolationQuotesNoPayload: a violation names where the payload fails
// (a JSON pointer) and the contract's rule (its keyword, and the pattern,
// enum, const or bound the contract holds), never a value of the payload,
// nor a property name the contract does not name.
func TestViolationQuotesNoPayload(t *testing.T) {
	for _, tc := range []struct {
		name, schema, payload string
		instance              string   // the violation's InstanceLocation
		want                  []string // in its message
	}{
		{name: "pattern", schema: `{"properties": {"card": {"pattern": "^[0-9]{4}$"}}}`, payload: `{"card": "` + secret + `"}`,
			instance: "/card", want: []string{"pattern", "^[0-9]{4}$"}},
		{name: "enum", schema: `{"properties": {"s": {"enum": ["new", "paid"]}}}`, payload: `{"s": "` + secret + `"}`,
			instance: "/s", want: []string{"'new', 'paid'"}},
		{name: "const", schema: `{"properties": {"s": {"const": "order"}}}`, payload: `{"s": "` + secret + `"}`,
			instance: "/s", want: []string{"'order'"}},
		{name: "format", schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"m": {"format": "email"}}}`, payload: `{"m": "` + secret + `"}`,
			instance: "/m", want: []string{"format", "email"}},
		{name: "minimum", schema: `{"properties": {"n": {"minimum": 1e17}}}`, payload: `{"n": ` + secret + `}`,
			instance: "/n", want: []string{"minimum", "1e+17"}},
		{name: "maximum", schema: `{"properties": {"n": {"maximum": 10}}}`, payload: `{"n": ` + secret + `}`,
			instance: "/n", want: []string{"maximum", "10"}},
		{name: "exclusive maximum", schema: `{"properties": {"n": {"exclusiveMaximum": 10}}}`, payload: `{"n": ` + secret + `}`,
			instance: "/n", want: []string{"exclusiveMaximum", "10"}},
		{name: "multipleOf", schema: `{"properties": {"n": {"multipleOf": 7}}}`, payload: `{"n": ` + secret + `}`,
			instance: "/n", want: []string{"multipleOf", "7"}},
		{name: "maxLength", schema: `{"properties": {"s": {"maxLength": 4}}}`, payload: `{"s": "` + secret + `"}`,
			instance: "/s", want: []string{"maxLength", "4"}},
		{name: "additional property", schema: `{"additionalProperties": false}`, payload: `{"` + secret + `": 1}`,
			want: []string{"additionalProperties"}},
		{name: "property names", schema: `{"propertyNames": {"maxLength": 3}}`, payload: `{"` + secret + `": 1}`,
			want: []string{"propertyNames"}},
		{name: "under a payload's key", schema: `{"additionalProperties": {"type": "integer"}}`, payload: `{"` + secret + `": "x"}`,
			instance: "/*", want: []string{"want integer"}},
		{name: "under a pattern's key", schema: `{"patternProperties": {"^[0-9]+$": {"properties": {"a": {"type": "integer"}}}}}`,
			payload: `{"` + secret + `": {"a": "x"}}`, instance: "/*/a", want: []string{"want integer"}},
		{name: "in an array", schema: `{"properties": {"l": {"items": {"properties": {"c": {"pattern": "^x$"}}}}}}`,
			payload: `{"l": [{"c": "x"}, {"c": "` + secret + `"}]}`, instance: "/l/1/c", want: []string{"pattern"}},
		{name: "a name the contract holds", schema: `{"properties": {"a b/c~": {"properties": {"n": {"type": "integer"}}}}}`,
			payload: `{"a b/c~": {"n": "` + secret + `"}}`, instance: "/a b~1c~0/n", want: []string{"want integer"}},
		{name: "huge number", schema: `{}`, payload: `[` + secret + `e9999]`, want: []string{"exponent"}},
		{name: "not JSON", schema: `{}`, payload: `{"a": ` + secret + `x}`, want: []string{"not JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := Load(writeDir(t, map[string]string{"E.json": tc.schema}), UnknownAllow)
			if err != nil {
				t.Fatal(err)
			}
			err = set.Validate("E", []byte(tc.payload))
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("Validate: %v, want a *Violation", err)
			}
			for _, said := range []string{err.Error(), v.Location()} {
				if strings.Contains(said, secret) || strings.Contains(said, secret[1:8]) {
					t.Errorf("the payload's value is in %q", said)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("violation %q: want %q", err, w)
				}
			}
			if v.InstanceLocation != tc.instance {
				t.Errorf("instance location %q, want %q", v.InstanceLocation, tc.instance)
			}
		})
	}
}
