package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// envelopeRows are written under each structured envelope, each to the
// table whose payload column has its type (0: jsonb, 1: text, 2: bytea).
var envelopeRows = []struct {
	name    string
	table   int
	payload any
}{
	{"jsonb object", 0, `{"order": {"id": 7, "total": 12.5, "lines": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}]}, "gift": false, "note": null}`},
	{"jsonb empty array", 0, `{"tags": []}`},
	{"text", 1, "hello, world"},
	{"text holding JSON", 1, `{"k": "v"}`},
	{"bytea", 2, []byte{0x00, 0x01, 0xff}},
	{"bytea holding JSON", 2, []byte(`{"b": 1}`)},
}

// TestEnvelopes publishes jsonb, text and bytea payloads under
// --envelope=cloudevents-structured and --envelope=connect-json (payload as
// a string, then expanded), checks the values field by field, and has Kafka
// Connect's own JsonConverter read every connect-json value: the test
// fails if it refuses one.
func TestEnvelopes(t *testing.T) {
	check := newConnectJSONChecker(t)
	if out, err := check.run(t, [][]byte{[]byte(`{"schema":{"type":"struct","fields":[{"type":"float64","optional":false,"field":"x"}],"optional":false},"payload":{"x":1}}`)}); err == nil {
		t.Fatalf("the checker accepted a schema JsonConverter does not know (float64):\n%s", out)
	}

	t.Run("cloudevents-structured", func(t *testing.T) {
		msgs, tables := publishEnvelopes(t, "env_ce", "--envelope", "cloudevents-structured")
		want := map[string]struct{ member, value, contentType string }{
			"jsonb object":       {"data", `{"gift":false,"note":null,"order":{"id":7,"lines":[{"qty":2,"sku":"A"},{"qty":1,"sku":"B"}],"total":12.5}}`, "application/json"},
			"jsonb empty array":  {"data", `{"tags":[]}`, "application/json"},
			"text":               {"data", `"hello, world"`, "text/plain; charset=utf-8"},
			"text holding JSON":  {"data", `{"k":"v"}`, "application/json"},
			"bytea":              {"data_base64", `"AAH/"`, "application/octet-stream"},
			"bytea holding JSON": {"data", `{"b":1}`, "application/json"},
		}
		for _, r := range envelopeRows {
			m, w := msgs[r.name], want[r.name]
			if ct, _ := testkit.Header(m, "content-type"); ct != sink.ContentTypeCloudEvents {
				t.Errorf("%s: content-type header %q, want %q", r.name, ct, sink.ContentTypeCloudEvents)
			}
			var ce map[string]json.RawMessage
			if err := json.Unmarshal(m.Value, &ce); err != nil {
				t.Fatalf("%s: value is not JSON: %v\n%s", r.name, err, m.Value)
			}
			id, _ := testkit.Header(m, "id")
			attrs := map[string]string{"specversion": `"1.0"`, "id": `"` + id + `"`, "type": `"thing.happened"`,
				"source": `"/outbox-cdc/public.` + tables[r.table] + `"`, "subject": `"agg-1"`, "partitionkey": `"agg-1"`,
				"datacontenttype": `"` + w.contentType + `"`, w.member: w.value}
			for k, v := range attrs {
				if string(ce[k]) != v {
					t.Errorf("%s: %s = %s, want %s", r.name, k, ce[k], v)
				}
			}
			var at time.Time
			if err := json.Unmarshal(ce["time"], &at); err != nil || time.Since(at) > time.Minute {
				t.Errorf("%s: time %s (%v), want the row's created_at", r.name, ce["time"], err)
			}
			if len(ce) != len(attrs)+1 {
				t.Errorf("%s: %d members, want %d: %s", r.name, len(ce), len(attrs)+1, m.Value)
			}
		}
	})

	t.Run("connect-json", func(t *testing.T) {
		msgs, _ := publishEnvelopes(t, "env_cj", "--envelope", "connect-json")
		checkConnectValues(t, check, msgs, map[string]string{"jsonb object": "string", "jsonb empty array": "string",
			"text": "string", "text holding JSON": "string", "bytea": "bytes", "bytea holding JSON": "string"},
			`payload=hello, world`)
	})

	t.Run("connect-json expanded", func(t *testing.T) {
		msgs, _ := publishEnvelopes(t, "env_cx", "--envelope", "connect-json", "--connect-expand-payload")
		// Connect's Struct.toString leaves null fields (note) out.
		checkConnectValues(t, check, msgs, map[string]string{"jsonb object": "struct", "jsonb empty array": "string",
			"text": "string", "text holding JSON": "struct", "bytea": "bytes", "bytea holding JSON": "struct"},
			`payload=Struct{gift=false,order=Struct{id=7,lines=[Struct{qty=2,sku=A}, Struct{qty=1,sku=B}],total=12.5}}`,
			`payload=Struct{k=v}`, `payload=Struct{b=1}`, `payload={"tags": []}`)
	})
}

// publishEnvelopes writes envelopeRows to three tables (jsonb, text and
// bytea payloads) relayed by one relay with extra flags, and returns what
// it published by row name, and the tables' names.
func publishEnvelopes(t *testing.T, prefix string, extra ...string) (map[string]kafka.Message, [3]string) {
	t.Helper()
	typed := func(typ string) string {
		return strings.Replace(defaultColumns, "payload jsonb not null", "payload "+typ+" not null", 1)
	}
	outboxes := [3]*outbox{newOutbox(t, prefix+"_j", defaultColumns), newOutbox(t, prefix+"_t", typed("text")), newOutbox(t, prefix+"_b", typed("bytea"))}
	names := [3]string{outboxes[0].name, outboxes[1].name, outboxes[2].name}
	startRelay(t, replaceFlag(outboxes[0].args(extra...), "--table", "public."+names[0]+",public."+names[1]+",public."+names[2])...)
	rows := map[string]string{} // id → row name
	for _, r := range envelopeRows {
		id := uuid.NewString()
		outboxes[r.table].insertOne(t, id, "env", "agg-1", "thing.happened", r.payload, nil)
		rows[id] = r.name
	}
	got, dups := byID(t, consume(t, []string{names[0] + ".env"}, len(rows), 30*time.Second))
	out := map[string]kafka.Message{}
	for id, name := range rows {
		m, ok := got[id]
		if !ok {
			t.Fatalf("row %q (%s) was not published", name, id)
		}
		out[name] = m
	}
	if dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	return out, names
}

// checkConnectValues checks each value's payload schema type (by row
// name), then has JsonConverter read them all, its output holding each of
// wantOut.
func checkConnectValues(t *testing.T, check connectJSONChecker, msgs map[string]kafka.Message, payloadTypes map[string]string, wantOut ...string) {
	t.Helper()
	var values [][]byte
	for _, r := range envelopeRows {
		m := msgs[r.name]
		var env struct {
			Schema struct {
				Name   string `json:"name"`
				Fields []struct{ Type, Field string }
			}
		}
		if err := json.Unmarshal(m.Value, &env); err != nil {
			t.Fatalf("%s: value is not JSON: %v\n%s", r.name, err, m.Value)
		}
		typ := ""
		for _, f := range env.Schema.Fields {
			if f.Field == "payload" {
				typ = f.Type
			}
		}
		if typ != payloadTypes[r.name] || env.Schema.Name != sink.ConnectSchemaName || string(m.Key) != "agg-1" {
			t.Errorf("%s: payload schema type %q (want %s), schema name %q, key %q\n%s", r.name, typ, payloadTypes[r.name], env.Schema.Name, m.Key, m.Value)
		}
		values = append(values, m.Value)
	}
	out, err := check.run(t, values)
	if err != nil {
		t.Fatalf("Kafka Connect's JsonConverter refused a value: %v\n%s", err, out)
	}
	if n := strings.Count(out, "\nok "); n != len(values) {
		t.Errorf("JsonConverter read %d values, want %d:\n%s", n, len(values), out)
	}
	for _, w := range wantOut {
		if !strings.Contains(out, w) {
			t.Errorf("JsonConverter's output lacks %s:\n%s", w, out)
		}
	}
	t.Logf("JsonConverter read them:%s", out)
}

// connectJSONChecker runs testdata/connectjson/ConnectJsonCheck.java,
// compiled against Kafka Connect's connect-json (and connect-api, Jackson)
// from Maven Central.
type connectJSONChecker struct{ classpath string }

const connectJSONVersion = "3.9.1" // keep in step with testdata/connectjson/pom.xml

func newConnectJSONChecker(t *testing.T) connectJSONChecker {
	t.Helper()
	for _, tool := range []string{"mvn", "javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: this test runs Kafka Connect's JsonConverter (apt-get install maven openjdk-17-jdk-headless)", tool)
		}
	}
	libs := connectJSONLibs(t)
	classes := t.TempDir()
	cmd := exec.Command("javac", "-cp", filepath.Join(libs, "*"), "-d", classes, filepath.Join("testdata", "connectjson", "ConnectJsonCheck.java"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac ConnectJsonCheck.java: %v\n%s", err, out)
	}
	return connectJSONChecker{classpath: classes + string(os.PathListSeparator) + filepath.Join(libs, "*")}
}

// connectJSONLibs resolves the jars once into the cache scripts/kafka.sh
// uses ($OUTBOX_CDC_CACHE, else ~/.cache/outbox-cdc).
func connectJSONLibs(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("OUTBOX_CDC_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("no cache directory: %v", err)
		}
		cache = filepath.Join(dir, "outbox-cdc")
	}
	libs := filepath.Join(cache, "connect-json-"+connectJSONVersion, "libs")
	if _, err := os.Stat(filepath.Join(libs, ".complete")); err == nil {
		return libs
	}
	tmp := fmt.Sprintf("%s.tmp.%d", libs, os.Getpid())
	cmd := exec.Command("mvn", "-q", "-B", "-C", "-f", filepath.Join("testdata", "connectjson", "pom.xml"), "dependency:copy-dependencies",
		"-DoutputDirectory="+tmp, "-DincludeScope=runtime")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		t.Fatalf("mvn could not resolve connect-json %s from Maven Central: %v\n%s", connectJSONVersion, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(libs)
	if err := os.Rename(tmp, libs); err != nil {
		t.Fatalf("cache connect-json's jars: %v", err)
	}
	return libs
}

// run hands values to JsonConverter, one base64 line each; err is set when
// it refused any (or could not run), out is what it printed.
func (c connectJSONChecker) run(t *testing.T, values [][]byte) (out string, err error) {
	t.Helper()
	var lines bytes.Buffer
	for _, v := range values {
		lines.WriteString(base64.StdEncoding.EncodeToString(v) + "\n")
	}
	file := filepath.Join(t.TempDir(), "values.b64")
	if err := os.WriteFile(file, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd := exec.Command("java", "-cp", c.classpath, "ConnectJsonCheck", file)
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err = cmd.Run()
	return "\n" + stdout.String(), err
}
