package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// TestCheck: one item for the registry, then one per contract: compatible
// with its existing subjects, incompatible, or new; a registry that does
// not answer, or refuses the credentials, is one failing item.
func TestCheck(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /subjects", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`["orders-A","other-A","orders-B","orders-Bx"]`))
	})
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions/latest", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"is_compatible":` + map[bool]string{true: "true", false: "false"}[r.PathValue("subject") != "orders-B"] + `}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r := newRegistry(t, srv.URL, docs{"A": `{}`, "B": `{}`, "C": `{}`})
	items := r.Check(context.Background(), []string{"A", "B", "C"}, []string{"orders"})
	want := []struct {
		status checklist.Status
		detail string
	}{
		{checklist.OK, "answers (4 subjects)"},
		{checklist.OK, "compatible with orders-A, other-A"},
		{checklist.Fail, "incompatible with the latest version of orders-B under"},
		{checklist.OK, "no subject yet: registered on first use; new: orders-C"},
	}
	if len(items) != len(want) {
		t.Fatalf("%d items, want %d: %+v", len(items), len(want), items)
	}
	for i, w := range want {
		if items[i].Status != w.status || !strings.Contains(items[i].Detail, w.detail) {
			t.Errorf("item %d: %s %q; want %s, with %q", i, items[i].Status, items[i].Detail, w.status, w.detail)
		}
	}

	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	defer denied.Close()
	items = newRegistry(t, denied.URL, docs{"A": `{}`}).Check(context.Background(), []string{"A"}, nil)
	if len(items) != 1 || items[0].Status != checklist.Fail || !strings.Contains(items[0].Fix, "--schema-registry-user") {
		t.Errorf("denied: %+v; want one failing item about the credentials", items)
	}
}
