package contract

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// writeDir makes a contracts directory of files (path → content).
func writeDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	orderSchema = `{"type": "object", "required": ["id", "price"],
		"properties": {"id": {"type": "string"}, "price": {"$ref": "common/money.json"},
			"items": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer", "minimum": 1}}}}}}`
	moneySchema = `{"type": "object", "required": ["amount", "currency"],
		"properties": {"amount": {"type": "number"}, "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}`
	validOrder = `{"id": "o-1", "price": {"amount": 12.5, "currency": "EUR"}, "items": [{"qty": 2}]}`
)

// contracts is a directory exercising each way to name a contract: by file
// name, a $ref by relative path and one by $id.
var contracts = map[string]string{
	"OrderPlaced.json":        orderSchema,
	"common/money.json":       moneySchema,
	"Ping.json":               `{"$ref": "https://schemas.example.com/ping.json"}`,
	"common/ping.json":        `{"$id": "https://schemas.example.com/ping.json", "type": "object", "properties": {"n": {"type": "integer"}}}`,
	"common/not-a-contract.x": `not read`,
}

func TestValidate(t *testing.T) {
	set, err := Load(writeDir(t, contracts), UnknownAllow)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.EventTypes(); !slices.Equal(got, []string{"OrderPlaced", "Ping"}) {
		t.Errorf("event types %q, want OrderPlaced and Ping (common/ holds no contract)", got)
	}
	for _, tc := range []struct {
		name, eventType, payload string
		instance, keyword        string // of a violation; both empty and ok false: valid
		absolute, msg            string
		ok                       bool
	}{
		{name: "valid", eventType: "OrderPlaced", payload: validOrder, ok: true},
		{name: "valid through $id", eventType: "Ping", payload: `{"n": 3}`, ok: true},
		{name: "unknown type allowed", eventType: "Other", payload: `not even JSON`, ok: true},
		{name: "wrong type", eventType: "OrderPlaced", payload: `{"id": 7, "price": {"amount": 1, "currency": "EUR"}}`,
			instance: "/id", keyword: "/properties/id/type", msg: "got number, want string"},
		{name: "missing property", eventType: "OrderPlaced", payload: `{"id": "o-1"}`,
			instance: "", keyword: "/required", msg: "missing property 'price'"},
		{name: "in an array", eventType: "OrderPlaced", payload: `{"id": "o", "price": {"amount": 1, "currency": "EUR"}, "items": [{"qty": 1}, {"qty": 0}]}`,
			instance: "/items/1/qty", keyword: "/properties/items/items/properties/qty/minimum", msg: "minimum"},
		{name: "across files", eventType: "OrderPlaced", payload: `{"id": "o", "price": {"amount": 1, "currency": "eur"}}`,
			instance: "/price/currency", keyword: "/properties/price/$ref/properties/currency/pattern",
			absolute: "common/money.json#/properties/currency/pattern", msg: "does not match pattern"},
		{name: "through $id", eventType: "Ping", payload: `{"n": 1.5}`, instance: "/n", keyword: "/$ref/properties/n/type",
			absolute: "https://schemas.example.com/ping.json#/properties/n/type", msg: "want integer"},
		{name: "not JSON", eventType: "OrderPlaced", payload: `{"id": "o-1",`, msg: "payload is not JSON"},
		{name: "empty payload", eventType: "OrderPlaced", payload: ``, msg: "payload is not JSON"},
		{name: "two values", eventType: "Ping", payload: `{} {}`, msg: "payload is not JSON"},
		{name: "huge exponent", eventType: "Ping", payload: `{"n": 1e1001}`, msg: "exponent beyond ±1000"},
		{name: "large exponent", eventType: "OrderPlaced", payload: `{"id": "o", "price": {"amount": 1e999, "currency": "EUR"}}`, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := set.Validate(tc.eventType, []byte(tc.payload))
			if tc.ok {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("Validate: %v, want a *Violation", err)
			}
			if v.Missing || v.MissingContract() || v.InstanceLocation != tc.instance || v.KeywordLocation != tc.keyword || v.AbsoluteKeywordLocation != tc.absolute {
				t.Errorf("violation at %q, keyword %q, absolute %q (missing %v); want %q, %q, %q",
					v.InstanceLocation, v.KeywordLocation, v.AbsoluteKeywordLocation, v.Missing, tc.instance, tc.keyword, tc.absolute)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.eventType+".json") {
				t.Errorf("error %q: want the contract named and %q", err, tc.msg)
			}
			if loc := v.Location(); !strings.Contains(loc, `"instanceLocation":"`+tc.instance+`"`) || !strings.Contains(loc, `"keywordLocation":"`+tc.keyword+`"`) {
				t.Errorf("Location() = %s", loc)
			}
		})
	}
}

func TestUnknownDeadLetter(t *testing.T) {
	set, err := Load(writeDir(t, contracts), UnknownDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	err = set.Validate("OrderShipped", []byte(validOrder))
	var v *Violation
	if !errors.As(err, &v) || !v.MissingContract() || v.Location() != "" || !strings.Contains(err.Error(), `"OrderShipped" has no contract`) {
		t.Errorf("an unknown type: %v, want a missing contract without location", err)
	}
	if err := set.Validate("OrderPlaced", []byte(validOrder)); err != nil {
		t.Errorf("a known type: %v", err)
	}
}

// TestIndex: with an index only its entries are contracts, under any
// event type and in any subdirectory.
func TestIndex(t *testing.T) {
	for _, name := range []string{"index.yaml", "index.json"} {
		t.Run(name, func(t *testing.T) {
			index := "contracts:\n  order.placed: orders/placed.v2.json\n  Ping: ./Ping.json\n"
			if name == "index.json" {
				index = `{"contracts": {"order.placed": "orders/placed.v2.json", "Ping": "./Ping.json"}}`
			}
			set, err := Load(writeDir(t, map[string]string{
				name: index, "orders/placed.v2.json": strings.Replace(orderSchema, "common/", "../common/", 1), "common/money.json": moneySchema,
				"Ping.json": `{"type": "object"}`, "Unlisted.json": `{"type": "string"}`,
			}), UnknownDeadLetter)
			if err != nil {
				t.Fatal(err)
			}
			if got := set.EventTypes(); !slices.Equal(got, []string{"Ping", "order.placed"}) {
				t.Errorf("event types %q", got)
			}
			if err := set.Validate("order.placed", []byte(validOrder)); err != nil {
				t.Errorf("order.placed: %v", err)
			}
			if err := set.Validate("order.placed", []byte(`{"id": "o", "price": {"amount": 1}}`)); err == nil {
				t.Errorf("order.placed: a payload missing the currency passed")
			}
			if err := set.Validate("Unlisted", []byte(`"s"`)); err == nil {
				t.Errorf("a file the index does not list was taken as a contract")
			}
		})
	}
}

// TestLoadRefused: every file that cannot be used is named, with why.
func TestLoadRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		unknown Unknown
		want    []string // in the error, in order
	}{
		{name: "bad schema", files: map[string]string{"Good.json": `{}`, "Bad.json": `{"type": 12}`},
			want: []string{"Bad.json: contract of Bad:", "type"}},
		{name: "two bad schemas", files: map[string]string{"A.json": `{"minimum": "x"}`, "B.json": `{"pattern": "("}`},
			want: []string{"A.json: contract of A", "; ", "B.json: contract of B"}},
		{name: "not JSON, and a bad schema", files: map[string]string{"A.json": `{`, "B.json": `{"type": 1}`},
			want: []string{"A.json: not JSON", "B.json: contract of B"}},
		{name: "index names a file that is not JSON", files: map[string]string{"index.yaml": "contracts: {A: a.json}", "a.json": `{`},
			want: []string{"a.json: not JSON"}},
		{name: "remote $ref", files: map[string]string{"A.json": `{"$ref": "https://example.com/money.json"}`},
			want: []string{"A.json", "remote $ref https://example.com/money.json refused", "network"}},
		{name: "ref outside", files: map[string]string{"A.json": `{"$ref": "../money.json"}`},
			want: []string{"A.json", "outside"}},
		{name: "ref to no file", files: map[string]string{"A.json": `{"$ref": "common/none.json"}`},
			want: []string{"A.json", "common/none.json: no such *.json file"}},
		{name: "broken ref", files: map[string]string{"A.json": `{"$ref": "m.json#/definitions/none"}`, "m.json": `{}`},
			want: []string{"A.json", "contract of A"}},
		{name: "index names no file", files: map[string]string{"index.yaml": "contracts: {A: a.json}", "b.json": `{}`},
			want: []string{"index.yaml: index: A: no JSON file a.json"}},
		{name: "index outside", files: map[string]string{"index.yaml": "contracts: {A: ../a.json}"},
			want: []string{"index.yaml: index: A: ../a.json is outside"}},
		{name: "index unknown key", files: map[string]string{"index.yaml": "contract: {A: a.json}", "a.json": `{}`},
			want: []string{"index.yaml: index:", "contract"}},
		{name: "two indexes", files: map[string]string{"index.yaml": "contracts: {A: a.json}", "index.json": `{"contracts": {}}`, "a.json": `{}`},
			want: []string{"a second index"}},
		{name: "no contract", files: map[string]string{"common/a.json": `{}`}, want: []string{"no contract"}},
		{name: "same $id twice", files: map[string]string{"A.json": `{"$id": "urn:x"}`, "B.json": `{"$id": "urn:x"}`},
			want: []string{"B.json: $id urn:x is also A.json's"}},
		{name: "bad unknown", files: map[string]string{"A.json": `{}`}, unknown: "drop", want: []string{`"drop": want allow or dead-letter`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			set, err := Load(dir, tc.unknown)
			if err == nil || set != nil {
				t.Fatalf("Load: %v, %v; want an error", set, err)
			}
			msg, at := err.Error(), 0
			t.Log(msg)
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q: want %q (after %q)", msg, w, msg[:at])
				}
				at += i + len(w)
			}
			if strings.Contains(msg, "file://") {
				t.Errorf("error %q holds a file URL: want paths", msg)
			}
			var le *LoadError
			if errors.As(err, &le) && !strings.HasPrefix(le.Problems[0].File, dir) {
				t.Errorf("problem %q: want its path in %s", le.Problems[0].File, dir)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none"), UnknownAllow); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing directory: %v", err)
	}
}

// TestValidateConcurrently: one Set serves a session and a backfill at once.
func TestValidateConcurrently(t *testing.T) {
	set, err := Load(writeDir(t, contracts), UnknownAllow)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 200 {
				if err := set.Validate("OrderPlaced", []byte(validOrder)); err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
				if set.Validate("OrderPlaced", []byte(`{"id": 1}`)) == nil {
					t.Errorf("goroutine %d: an invalid payload passed", i)
					return
				}
			}
		})
	}
	wg.Wait()
}
