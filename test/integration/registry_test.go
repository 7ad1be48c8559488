package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// apicurio is a throwaway Apicurio Registry (scripts/apicurio.sh).
type apicurio struct{ ccompat string }

// startApicurio starts one for t, stopped by t.Cleanup even when t fails.
// Only with OUTBOX_CDC_TEST_REGISTRY=1: it takes seconds and 300 MB.
func startApicurio(t *testing.T) apicurio {
	t.Helper()
	if os.Getenv("OUTBOX_CDC_TEST_REGISTRY") != "1" {
		t.Skip("set OUTBOX_CDC_TEST_REGISTRY=1 to run it against Apicurio Registry (scripts/apicurio.sh: needs mvn and Java 21+, or APICURIO_VERSION=2.6.13.Final on Java 17)")
	}
	root, err := testkit.Root()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "apicurio.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, "start")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vals[k] = v
		}
	}
	if dir := vals["dir"]; dir != "" {
		t.Cleanup(func() {
			if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
				t.Errorf("stop apicurio: %v: %s", err, out)
			}
		})
	}
	if err != nil || vals["ccompat"] == "" {
		t.Fatalf("scripts/apicurio.sh start: %v: %s", err, stderr.String())
	}
	t.Logf("apicurio at %s (pid %s)", vals["ccompat"], vals["pid"])
	return apicurio{ccompat: vals["ccompat"]}
}

// call sends body (nil: none) to the Confluent API and decodes the answer.
func (a apicurio) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, a.ccompat+path, rd)
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && json.Unmarshal(b, out) != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// outage is a proxy in front of the registry that answers 503 while down.
func outage(t *testing.T, target string) (base string, down *atomic.Bool) {
	u, _ := url.Parse(target)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host}) }}
	down = new(atomic.Bool)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"error_code":50301,"message":"down for the test"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, down
}

const (
	placedContract = `{"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}}`
	// refusedContract retypes a, which the subject's FULL rule forbids.
	// Without $schema: Apicurio 3.3's compatibility rules cannot read a
	// 2019-09 or 2020-12 schema and answer 500 (an outage, waited out).
	refusedContract = `{"type": "object", "properties": {"a": {"type": "integer"}}}`
)

// TestSchemaRegistry: a relay with --contracts and --schema-registry
// (Apicurio's Confluent API, behind a proxy that fails on demand). While
// the registry answers 503 nothing is published; once it answers, every
// event arrives once, in commit order: OrderPlaced framed (0x00, a schema
// id that resolves to its contract, the row's payload byte for byte),
// OrderShipped (no contract) as it was. A contract the subject's rule
// refuses is dead-lettered (schema_registry_refused, the registry's
// answer in a header); check says so, and that the others are compatible.
func TestSchemaRegistry(t *testing.T) {
	reg := startApicurio(t)
	o := newOutbox(t, "registry", textPayloadColumns)
	dir := t.TempDir()
	for name, body := range map[string]string{"OrderPlaced.json": placedContract, "OrderRefused.json": refusedContract} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topic, dlq := o.name+".order", o.name+".dlq"
	// The refused subject has a version the contract is incompatible with.
	refusedSubject := topic + "-OrderRefused"
	if code := reg.call(t, "POST", "/subjects/"+refusedSubject+"/versions", `{"schemaType":"JSON","schema":"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}"}`, nil); code != 200 {
		t.Fatalf("pre-register %s: %d", refusedSubject, code)
	}
	if code := reg.call(t, "PUT", "/config/"+refusedSubject, `{"compatibility":"FULL"}`, nil); code != 200 {
		t.Fatalf("set %s's rule: %d", refusedSubject, code)
	}
	base, down := outage(t, reg.ccompat)
	down.Store(true)
	args := o.args("--dlq-topic", dlq, "--contracts", dir, "--schema-registry", base)
	startRelay(t, args...)

	type event struct{ id, eventType, payload string }
	var events []event
	for i := range 6 {
		ev := event{uuid.NewString(), "OrderPlaced", fmt.Sprintf(`{"id":"o-1",  "n": %d}`, i)}
		if i%3 == 1 {
			ev.eventType = "OrderShipped"
		}
		events = append(events, ev)
		o.insertOne(t, ev.id, "order", "o-1", ev.eventType, ev.payload, nil)
	}
	time.Sleep(3 * time.Second)
	if n := countAll(t, topic); n != 0 {
		t.Fatalf("%d records published while the registry was down, want none", n)
	}
	down.Store(false)
	refusedID := o.insertOne(t, uuid.NewString(), "order", "o-1", "OrderRefused", `{"a":1}`, nil)

	msgs := consume(t, []string{topic}, len(events), time.Minute)
	if len(msgs) != len(events) {
		t.Fatalf("%s holds %d records, want %d", topic, len(msgs), len(events))
	}
	ids := map[uint32]bool{}
	for i, m := range msgs {
		ev := events[i]
		if id, _ := testkit.Header(m, "id"); id != ev.id {
			t.Fatalf("record %d is %s, want %s: out of order", i, id, ev.id)
		}
		if ev.eventType == "OrderShipped" {
			if string(m.Value) != ev.payload {
				t.Errorf("%s (no contract): value %q, want the payload unframed", ev.id, m.Value)
			}
			continue
		}
		if len(m.Value) < 5 || m.Value[0] != 0 || string(m.Value[5:]) != ev.payload {
			t.Fatalf("%s: value %q, want 0x00, a schema id, then %q", ev.id, m.Value, ev.payload)
		}
		ids[uint32(m.Value[1])<<24|uint32(m.Value[2])<<16|uint32(m.Value[3])<<8|uint32(m.Value[4])] = true // big-endian
	}
	if len(ids) != 1 {
		t.Fatalf("schema ids %v, want one", ids)
	}
	for id := range ids {
		checkSchema(t, reg, id, placedContract)
	}
	checkRefused(t, dlq, refusedID)

	code, out := runOnce(t, append([]string{"check"}, without(without(args, "--status-interval"), "--http-addr")...)...)
	t.Logf("check (exit %d):\n%s", code, out)
	for _, want := range []string{"[ok  ] schema registry: ", "[ok  ] schema registry: OrderPlaced: compatible with " + topic + "-OrderPlaced",
		"[FAIL] schema registry: OrderRefused: incompatible with the latest version of " + refusedSubject} {
		if !strings.Contains(out, want) {
			t.Errorf("check does not say %q", want)
		}
	}
}

// checkSchema: id resolves to the contract, as its file holds it.
func checkSchema(t *testing.T, reg apicurio, id uint32, contract string) {
	t.Helper()
	var got struct{ Schema string }
	if code := reg.call(t, "GET", fmt.Sprintf("/schemas/ids/%d", id), "", &got); code != 200 {
		t.Fatalf("GET /schemas/ids/%d: %d", id, code)
	}
	if got.Schema != contract {
		t.Errorf("schema %d is %s, want the contract %s", id, got.Schema, contract)
	}
}

// checkRefused: the event is the dead-letter topic's, with the reason and
// the registry's answer.
func checkRefused(t *testing.T, dlq, id string) {
	t.Helper()
	dead := deadLetters(t, consumeN(t, dlq, 1, time.Minute))
	m, ok := dead[id]
	if !ok {
		t.Fatalf("event %s was not dead-lettered", id)
	}
	reason, _ := testkit.Header(m, "outbox_cdc.reason")
	answer, _ := testkit.Header(m, "outbox_cdc.schema_registry_error")
	if reason != "schema_registry_refused" || !strings.HasPrefix(answer, "409 ") || string(m.Value) != `{"a":1}` {
		t.Errorf("dead letter: reason %q, answer %q, value %q", reason, answer, m.Value)
	}
}

// countAll is how many records topic holds (0 when it does not exist).
func countAll(t *testing.T, topic string) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, total, err := testkit.EndOffsets(ctx, client, []string{topic})
	if err != nil {
		return 0
	}
	return total
}
