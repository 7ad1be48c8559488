package inbox

import (
	"context"
	"errors"
	"iter"
	"maps"
	"strings"
	"testing"
)

// pairs yields kv as key/value pairs, the way a client adapter does.
func pairs(kv ...string) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if !yield(kv[i], []byte(kv[i+1])) {
				return
			}
		}
	}
}

func TestFromHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers iter.Seq2[string, []byte]
		wantID  string // "" means ErrNoID
	}{
		{"id only", pairs("id", "e-1"), "e-1"},
		{"id among others", pairs("type", "OrderPaid", "id", "e-2", "traceparent", "00-x"), "e-2"},
		{"first id wins", pairs("id", "e-3", "id", "e-4"), "e-3"},
		{"empty id skipped", pairs("id", "", "id", "e-5"), "e-5"},
		{"key is case-sensitive", pairs("ID", "e-6"), ""},
		{"empty id only", pairs("id", ""), ""},
		{"no headers", pairs(), ""},
		{"nil headers", nil, ""},
		{"from a map", maps.All(map[string][]byte{"id": []byte("e-7"), "type": []byte("t")}), "e-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := FromHeaders("orders", 3, 42, tt.headers)
			if tt.wantID == "" {
				if !errors.Is(err, ErrNoID) {
					t.Fatalf("err = %v, want ErrNoID", err)
				}
				if !strings.Contains(err.Error(), "orders/3@42") {
					t.Errorf("err %q does not say where the record was read", err)
				}
				if rec != (Record{}) {
					t.Errorf("record %+v with an error, want the zero Record", rec)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Record{EventID: tt.wantID, Topic: "orders", Partition: 3, Offset: 42}
			if rec != want {
				t.Errorf("record %+v, want %+v", rec, want)
			}
		})
	}
}

// TestClaimWithoutID: a record without an id is refused before the
// transaction is touched (a nil one here would panic otherwise).
func TestClaimWithoutID(t *testing.T) {
	box := New("")
	if _, err := box.Claim(context.Background(), nil, Record{Topic: "orders"}); !errors.Is(err, ErrNoID) {
		t.Errorf("Claim: err = %v, want ErrNoID", err)
	}
	if _, err := box.ClaimSQL(context.Background(), nil, Record{Topic: "orders"}); !errors.Is(err, ErrNoID) {
		t.Errorf("ClaimSQL: err = %v, want ErrNoID", err)
	}
}

func TestNewTable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `"inbox"`},
		{"billing_inbox", `"billing_inbox"`},
		{"billing.inbox", `"billing"."inbox"`},
	}
	for _, tt := range tests {
		if got := New(tt.in).table; got != tt.want {
			t.Errorf("New(%q).table = %s, want %s", tt.in, got, tt.want)
		}
	}
}
