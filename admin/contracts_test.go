package admin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/contract"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// TestCheckContracts: check compiles the contracts with no server: one item
// when all compile, a failing item naming each file that does not, and
// one for a directory that cannot be read; a warning for each contract
// whose check can take time exponential in a payload.
func TestCheckContracts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		missing bool // the directory is not there
		onFail  bool // --on-invalid=fail
		unknown contract.Unknown
		want    []string // each item: "STATUS NAME", then a fragment of its detail
	}{
		{name: "none compile", files: map[string]string{"A.json": `{"type": 1}`, "B.json": `{"$ref": "http://x/b.json"}`, "C.json": `{}`},
			want: []string{"FAIL contract DIR/A.json", "its meta-schema", "FAIL contract DIR/B.json", "remote $ref http://x/b.json refused"}},
		{name: "all compile", files: map[string]string{"A.json": `{}`, "B.json": `{"$ref": "A.json"}`},
			want: []string{"ok contracts", "2 compiled from DIR (A, B); payloads that fail are dead-lettered (contract_violation); event types without a contract are published unchecked"}},
		{name: "unknown dead-lettered, on-invalid fail", files: map[string]string{"A.json": `{}`}, onFail: true, unknown: contract.UnknownDeadLetter,
			want: []string{"ok contracts", "payloads that fail are invalid, which stops the relay (--on-invalid=fail) (contract_violation); event types without a contract are invalid"}},
		{name: "no directory", missing: true, want: []string{"FAIL contracts", "contracts directory"}},
		{name: "a contract that can explode", files: map[string]string{"A.json": `{}`,
			"Chain.json": `{"anyOf": [{"properties": {"a": {"$ref": "#"}}, "required": ["x"]}, {"properties": {"a": {"$ref": "#"}}, "required": ["y"]}]}`},
			want: []string{"ok contracts", "2 compiled from DIR (A, Chain)",
				"warn contract DIR/Chain.json", "Chain.json# applies 2 branches that each lead back to it through the payload"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.missing {
				dir = filepath.Join(dir, "none")
			}
			cfg := config(func(c *relay.Config) {
				c.PostgresURL, c.Kafka.Brokers = "postgres://relay@127.0.0.1:1/app", []string{"127.0.0.1:1"}
				c.Contracts.Dir = dir
				if tc.unknown != "" {
					c.Contracts.Unknown = tc.unknown
				}
				if tc.onFail {
					c.Topics.OnInvalid = relay.OnInvalidFail
				}
			})
			r, err := Check(context.Background(), cfg, Offline(true))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Items) != len(tc.want)/2 {
				t.Fatalf("%d items, want %d: %+v", len(r.Items), len(tc.want)/2, r.Items)
			}
			for i, it := range r.Items {
				name := strings.ReplaceAll(string(it.Status)+" "+it.Name, dir, "DIR")
				if name != tc.want[2*i] || !strings.Contains(strings.ReplaceAll(it.Detail, dir, "DIR"), tc.want[2*i+1]) {
					t.Errorf("item %d: %s: %s; want %s: …%s…", i, name, it.Detail, tc.want[2*i], tc.want[2*i+1])
				}
				if it.Status != checklist.OK && it.Fix == "" {
					t.Errorf("item %d is %s without a fix", i, it.Status)
				}
			}
		})
	}
}
