package contract

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonCases are texts decodeJSON must read as jsonschema.UnmarshalJSON
// does, or refuse as it does.
var jsonCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12.50`, `1e400`, `-1.5E-3`, `123456789012345678901234567890`,
	`""`, `"plain"`, `"tab\tand \"quotes\" and \\ and \/"`, `"\u00e9t\u00e9 \ud83d\ude00"`, `"été 😀"`,
	"\"not UTF-8: \xff\xfe\"", `"\ud800 lone surrogate"`,
	` { "a" : [ 1 , { "b" : null } , [ ] , { } ] , "a" : "last wins" } `,
	`{"order_id": "c4ca4238a0b923820dcc509a6f75849b", "items": [{"qty": 3, "sku": "sku-12"}], "amount": 4242}`,
	// Refused:
	``, ` `, `{`, `{"a" 1}`, `{"a": 1,}`, `[1,]`, `01`, `1.`, `+1`, `.5`, `nul`, `"open`, "\"ctl \x01\"",
	`{} {}`, `{}x`, `'single'`, `{a: 1}`, `"\x"`, `NaN`,
	// Refused here alone: an exponent beyond maxExponent.
	`[1e1001]`, `{"a": -2.5E+99999}`,
}

func TestDecodeJSON(t *testing.T) {
	for _, text := range jsonCases {
		checkDecode(t, text)
	}
}

// FuzzDecodeJSON: on any input decodeJSON agrees with
// jsonschema.UnmarshalJSON, value for value.
func FuzzDecodeJSON(f *testing.F) {
	for _, text := range jsonCases {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) { checkDecode(t, text) })
}

func checkDecode(t *testing.T, text string) {
	t.Helper()
	want, wantErr := jsonschema.UnmarshalJSON(strings.NewReader(text))
	got, err := decodeJSON([]byte(text))
	if err != nil && wantErr == nil && strings.Contains(err.Error(), "exponent beyond") {
		return // refused on purpose: see maxExponent
	}
	switch {
	case (err == nil) != (wantErr == nil):
		t.Errorf("decodeJSON(%q): error %v, want %v", text, err, wantErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Errorf("decodeJSON(%q) = %#v, want %#v", text, got, want)
	}
}

// benchPayload is the payload outbox-bench writes, as Postgres prints its
// jsonb.
var benchPayload = []byte(`{"note": "` + strings.Repeat("n", 120) + `", "items": [{"qty": 3, "sku": "sku-12"}], "amount": 4242, ` +
	`"status": "created", "currency": "EUR", "customer": "customer-242", "order_id": "c4ca4238a0b923820dcc509a6f75849b"}`)

// BenchmarkDecodeJSON: decodeJSON against encoding/json with UseNumber.
func BenchmarkDecodeJSON(b *testing.B) {
	b.Run("decodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeJSON(benchPayload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d := json.NewDecoder(bytes.NewReader(benchPayload))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkValidate is what --contracts costs each event of outbox-bench:
// contract/testdata/bench holds its contract.
func BenchmarkValidate(b *testing.B) {
	set, err := Load("testdata/bench", UnknownAllow)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := set.Validate("created", benchPayload); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLongNumbersRefused: a number of more than maxDigits digits is refused
// at once, not read (math/big's time grows with its length squared: 5.9 s
// for 2 MB of digits was measured before this bound).
func TestLongNumbersRefused(t *testing.T) {
	long := "[" + strings.Repeat("7", 200_000) + ".5]"
	if _, err := decodeJSON([]byte(long)); err == nil {
		t.Fatal("a 200,000-digit number was accepted")
	}
	if _, err := decodeJSON([]byte("[" + strings.Repeat("7", 19) + "]")); err != nil {
		t.Fatalf("a 19-digit integer: %v", err)
	}
}
