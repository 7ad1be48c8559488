package contract

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// screenSchemas exercise every keyword the screen knows, alone and
// together; "other" uses one it does not know.
var screenSchemas = map[string]string{
	"Any":   `true`,
	"None":  `false`,
	"Empty": `{}`,
	"Order": `{"type": "object", "required": ["id", "price"], "additionalProperties": false,
		"properties": {"id": {"type": "string", "minLength": 2, "maxLength": 5}, "price": {"$ref": "common/money.json"},
			"status": {"enum": ["new", "paid", 3]}, "kind": {"const": "order"}, "note": {"type": ["string", "null"]},
			"tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1, "maxItems": 3},
			"flag": {"type": "boolean"}, "any": true, "never": false,
			"extra": {"type": "object", "additionalProperties": {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 10}}}}`,
	"common/money.json": `{"type": "object", "required": ["amount"],
		"properties": {"amount": {"type": "number", "minimum": 0.5, "maximum": 1e3}, "cents": {"type": "integer", "minimum": -5, "maximum": 12345678901234567890}}}`,
	"Union": `{"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 10}, {"$ref": "#/$defs/pair"}],
		"allOf": [{"type": ["string", "integer", "array"]}], "$defs": {"pair": {"type": "array", "items": {"$ref": "#/$defs/pair"}, "maxItems": 2}}}`,
	"Tree": `{"$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
		"$ref": "#/$defs/t", "required": ["v"]}`,
	"Both": `{"allOf": [{"type": "object", "required": ["a"]}, {"properties": {"a": {"enum": ["x", "y"]}}}], "anyOf": [{"required": ["b"]}, {"required": ["c"]}]}`,
	"Draft7": `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
		"type": "object", "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}, "b": {"items": {"type": "integer"}}}}`,
	"Other": `{"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}`,
	// Cycles that never go into the payload: no screen (it would not end).
	"Self":   `{"$ref": "#"}`,
	"Cycle":  `{"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}`,
	"Nested": `{"$defs": {"n": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/n"}}, {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 1}, {"type": "integer"}]}}, "$ref": "#/$defs/n"}`,
}

// screenPayloads are payloads for the schemas above; FuzzScreen starts from
// them.
var screenPayloads = []string{
	`{"id": "ab", "price": {"amount": 0.5}}`,
	`{"id": "abcde", "price": {"amount": 1000, "cents": 12345678901234567890}, "status": "paid", "kind": "order", "note": null,
		"tags": ["a", "bc"], "flag": true, "any": [1, {"x": null}], "extra": {"q": 9, "r": 0}}`,
	`{"id": "ab", "price": {"amount": 0.49}}`, `{"id": "ab", "price": {"amount": 1e3}}`, `{"id": "ab", "price": {"amount": 1000.0001}}`,
	`{"id": "ab", "price": {"amount": 1, "cents": 12345678901234567891}}`, `{"id": "ab", "price": {"amount": 1, "cents": 1.0}}`,
	`{"id": "ab", "price": {"amount": 1}, "status": 3}`, `{"id": "ab", "price": {"amount": 1}, "never": 1}`,
	`{"id": "a\u0062", "price": {"amount": 1}, "\u0073tatus": "new"}`, `{"id": "é€", "price": {"amount": 1}}`,
	`{"id": "ab", "price": {"amount": 1}, "extra": {"q": 10}}`, `{"id": "ab", "price": {"amount": 1}, "extra": {"q": -1}}`,
	`{"id": "ab", "id": "toolong", "price": {"amount": 1}}`, `{"id": "ab", "price": {"amount": 1}, "tags": []}`,
	`{"id": "ab", "price": {"amount": 1}, "other": 1}`, `{"price": {"amount": 1}}`, "{\"id\": \"a\xffb\", \"price\": {\"amount\": 1}}",
	`"x"`, `"xy"`, `12`, `9`, `12.0`, `[]`, `[[], [[]]]`, `[1]`, `[[], [], []]`, `0`, `null`,
	`{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}`, `{"v": 1, "kids": [{"kids": []}]}`, `{"v": 1.5}`,
	`{"a": "x", "b": 1}`, `{"a": "z", "c": 1}`, `{"a": "y"}`, `{"b": 1}`, `{"a": "y", "c": null}`,
	`{"a": "s", "b": [1, 2]}`, `{"a": "st"}`, `{"a": 1}`, `{"b": [1.5]}`,
	` {"a": 2} `, `{"a": 3}`,
	``, `{`, `{"id": "ab", "price": {"amount": 1},}`, `[1,]`, `01`, `-`, `1.`, `1e`, `"\x"`, "\"\x01\"", `{} x`, `nul`, `"\u12"`,
}

func loadScreens(t testing.TB) *Set {
	t.Helper()
	files := map[string]string{}
	for name, body := range screenSchemas {
		if !strings.HasSuffix(name, ".json") {
			name += ".json"
		}
		files[name] = body
	}
	set, err := Load(writeDir(t, files), UnknownAllow)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestScreen: each contract but Other, Self and Cycle has a screen, and on each payload
// a screen that passes agrees with jsonschema; the screen passes the
// valid payloads it is meant for (else it would be no fast path).
func TestScreen(t *testing.T) {
	set := loadScreens(t)
	for typ, c := range set.contracts {
		if (c.screen == nil) != (typ == "Other" || typ == "Self" || typ == "Cycle") {
			t.Errorf("%s: screen %v", typ, c.screen != nil)
		}
	}
	passed := map[string]int{}
	for _, p := range screenPayloads {
		for typ := range set.contracts {
			if checkScreen(t, set, typ, []byte(p)) {
				passed[typ]++
			}
		}
	}
	for typ, want := range map[string]int{"Any": 40, "Empty": 40, "Order": 6, "Union": 4, "Tree": 2, "Both": 2, "Draft7": 20} {
		if passed[typ] < want {
			t.Errorf("%s: the screen passed %d payloads, want %d or more", typ, passed[typ], want)
		}
	}
	t.Logf("payloads the screen passed: %v", passed)
}

// FuzzScreen: on any payload, for every contract, a screen that passes
// agrees with jsonschema, and never passes what is not JSON.
func FuzzScreen(f *testing.F) {
	for _, p := range screenPayloads {
		f.Add(p)
	}
	set := loadScreens(f)
	f.Fuzz(func(t *testing.T, p string) {
		for typ := range set.contracts {
			checkScreen(t, set, typ, []byte(p))
		}
	})
}

// checkScreen fails t when typ's screen passes payload and jsonschema
// does not, or the payload is not JSON; it returns whether it passed.
func checkScreen(t *testing.T, set *Set, typ string, payload []byte) bool {
	t.Helper()
	c := set.contracts[typ]
	if c.screen == nil || !c.screen.passes(payload) {
		return false
	}
	v, err := decodeJSON(payload)
	if err != nil || !json.Valid(payload) {
		t.Fatalf("%s: the screen passed %q, which is not JSON (%v)", typ, payload, err)
	}
	if err := c.schema.Validate(v); err != nil {
		t.Fatalf("%s: the screen passed %q, which jsonschema refuses: %v", typ, payload, err)
	}
	return true
}

// TestScreenIsStrictJSON: the screen of a contract that takes anything
// passes exactly what json.Valid does (but numbers beyond maxExponent).
func TestScreenIsStrictJSON(t *testing.T) {
	set := loadScreens(t)
	for _, p := range append(slices.Clone(screenPayloads), jsonCases...) {
		got, want := set.contracts["Any"].screen.passes([]byte(p)), json.Valid([]byte(p))
		if _, err := decodeJSON([]byte(p)); want && err != nil {
			want = false // an exponent beyond maxExponent, refused under any contract
		}
		if got != want {
			t.Errorf("%q: the screen says %v, json.Valid %v", p, got, want)
		}
	}
}

// TestScreenKnowsEverySchemaField fails when jsonschema's Schema gains a
// field: the screen must learn whether it constrains payloads (screenable
// refuses it) or not (an annotation), or it could pass what jsonschema
// refuses.
func TestScreenKnowsEverySchemaField(t *testing.T) {
	known := strings.Fields(`DraftVersion Location Bool ID Ref Anchor RecursiveRef RecursiveAnchor DynamicRef DynamicAnchor
		Types Enum Const Not AllOf AnyOf OneOf If Then Else Format MaxProperties MinProperties Required PropertyNames
		Properties PatternProperties AdditionalProperties Dependencies DependentRequired DependentSchemas
		UnevaluatedProperties MinItems MaxItems UniqueItems Contains MinContains MaxContains Items AdditionalItems
		PrefixItems Items2020 UnevaluatedItems MinLength MaxLength Pattern ContentEncoding ContentMediaType
		ContentSchema Maximum Minimum ExclusiveMaximum ExclusiveMinimum MultipleOf Extensions
		Title Description Default Comment ReadOnly WriteOnly Examples Deprecated`)
	typ := reflect.TypeFor[jsonschema.Schema]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() && !slices.Contains(known, f.Name) {
			t.Errorf("jsonschema.Schema has a field the screen and the steps bound (budget.go) do not know: %s", f.Name)
		}
	}
}

// TestScreenBudget: anyOf over a recursive schema reads a payload that
// fails at its bottom an exponential number of times; the screen gives up
// after a budget instead (2^60 readings would not end).
func TestScreenBudget(t *testing.T) {
	set := loadScreens(t)
	nested := set.contracts["Nested"].screen
	if !nested.passes([]byte(`[[1, [2]], 3]`)) {
		t.Errorf("the screen refused a valid payload")
	}
	deep := []byte(strings.Repeat("[", 60) + `"x"` + strings.Repeat("]", 60))
	if nested.passes(deep) {
		t.Errorf("the screen passed %s", deep)
	}
	// A cycle without the payload has no screen, and jsonschema reports it.
	if err := set.Validate("Self", []byte(`{}`)); err == nil {
		t.Errorf("Self: a $ref cycle passed")
	}
}
