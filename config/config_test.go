package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

func TestFlagWinsOverEnvironment(t *testing.T) {
	env := []string{
		"OUTBOX_CDC_POSTGRES_URL=postgres://env@h/db",
		"OUTBOX_CDC_KAFKA_BROKERS=a:9092, b:9092",
		"OUTBOX_CDC_SLOT=from_env",
		"OUTBOX_CDC_BATCH_TIMEOUT=2ms",
		"UNRELATED=1",
	}
	c, err := Parse(CmdRun, []string{"--slot", "from_flag", "--table", "app.events"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Relay
	if r.Slot.Name != "from_flag" || r.PostgresURL != "postgres://env@h/db" || r.Producer.BatchTimeout != 2*time.Millisecond {
		t.Errorf("slot %q url %q batch timeout %s", r.Slot.Name, r.PostgresURL, r.Producer.BatchTimeout)
	}
	if strings.Join(r.Kafka.Brokers, ",") != "a:9092,b:9092" || c.TableNames() != "app.events" {
		t.Errorf("brokers %v table %s", r.Kafka.Brokers, c.TableNames())
	}
	if r.Tables[0].Columns.Payload != "payload" || r.Tables[0].Route.Topic != "outbox.event.{aggregate_type}" || r.Slot.Publication != "outbox_cdc" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestUsageErrorsNameTheFix(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{nil, nil, "--postgres-url (or OUTBOX_CDC_POSTGRES_URL) is required"},
		{[]string{"--postgres-url", "postgres://x"}, nil, "--kafka-brokers (or OUTBOX_CDC_KAFKA_BROKERS) is required"},
		{append(base, "--slot", "Bad-Name"), nil, "--slot \"Bad-Name\""},
		{append(base, "--log-format", "xml"), nil, "want text or json"},
		{append(base, "--column-payload", ""), nil, "--column-payload must name a column"},
		{append(base, "--nope"), nil, "flag provided but not defined: -nope"},
		{base, []string{"OUTBOX_CDC_MAX_IN_FLIGHT=many"}, "OUTBOX_CDC_MAX_IN_FLIGHT=\"many\""},
		{append(base, "extra"), nil, "unexpected argument \"extra\""},
		// Parsed as the driver will parse it, and the error keeps no password.
		{[]string{"--postgres-url", "postgres://u:s3cr3t@h:99999/db", "--kafka-brokers", "k:1"}, nil, "--postgres-url cannot be parsed"},
		{[]string{"--postgres-url", "host=h port=5432 sslmode=sometimes", "--kafka-brokers", "k:1"}, nil, "--postgres-url cannot be parsed"},
	}
	for _, tt := range tests {
		_, err := Parse(CmdRun, tt.args, tt.env, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Parse(%q, %q) = %v, want a usage error containing %q", tt.args, tt.env, err, tt.want)
		}
	}
}

func TestHelpListsEnvironmentNames(t *testing.T) {
	var out strings.Builder
	if _, err := Parse(CmdRun, []string{"--help"}, nil, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--kafka-brokers (env OUTBOX_CDC_KAFKA_BROKERS", "--column-headers (env OUTBOX_CDC_COLUMN_HEADERS, default \"headers\")"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	url := dir + "/url"
	if err := os.WriteFile(url, []byte("postgres://relay:s3cret-pw@db:5432/app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := dir + "/pw"
	if err := os.WriteFile(pw, []byte("sasl-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"OUTBOX_CDC_POSTGRES_URL_FILE=" + url,
		"OUTBOX_CDC_KAFKA_BROKERS=k:9093",
		"OUTBOX_CDC_KAFKA_SASL_MECHANISM=scram-sha-512",
		"OUTBOX_CDC_KAFKA_SASL_USERNAME=relay",
		"OUTBOX_CDC_KAFKA_SASL_PASSWORD_FILE=" + pw,
		"OUTBOX_CDC_KAFKA_TLS_SERVER_NAME=kafka.internal",
	}
	c, err := Parse(CmdRun, nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Relay.PostgresURL != "postgres://relay:s3cret-pw@db:5432/app" || c.Relay.Kafka.SASL.Password != "sasl-pw" {
		t.Errorf("url %q, sasl password %q: the trailing newline should be trimmed", c.Relay.PostgresURL, c.Relay.Kafka.SASL.Password)
	}
	if !c.Relay.Kafka.TLS {
		t.Error("--kafka-tls-server-name should imply --kafka-tls")
	}
	if got := c.PostgresTarget(); got != "relay@db:5432/app" {
		t.Errorf("PostgresTarget() = %q", got)
	}

	_, err = Parse(CmdRun, nil, append(env, "OUTBOX_CDC_POSTGRES_URL=postgres://x"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "both OUTBOX_CDC_POSTGRES_URL and OUTBOX_CDC_POSTGRES_URL_FILE") {
		t.Errorf("both forms set: %v", err)
	}
	_, err = Parse(CmdRun, nil, []string{"OUTBOX_CDC_POSTGRES_URL_FILE=" + dir + "/missing"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "OUTBOX_CDC_POSTGRES_URL_FILE") {
		t.Errorf("missing file: %v", err)
	}
}

func TestKafkaSecurityUsage(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	tests := []struct {
		args []string
		want string
	}{
		{append(base, "--kafka-sasl-mechanism", "gssapi"), "want plain, scram-sha-256 or scram-sha-512"},
		{append(base, "--kafka-sasl-mechanism", "plain"), "--kafka-sasl-username"},
		{append(base, "--kafka-sasl-mechanism", "plain", "--kafka-sasl-username", "u"), "--kafka-sasl-password"},
		{append(base, "--kafka-sasl-username", "u"), "need --kafka-sasl-mechanism"},
		{append(base, "--kafka-tls-cert-file", "c.pem"), "go together"},
		{append(base, "--http-addr", "9090"), "--http-addr \"9090\""},
	}
	for _, tt := range tests {
		_, err := Parse(CmdRun, tt.args, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestCommandsHaveTheirOwnFlags(t *testing.T) {
	// status needs no Kafka; run does not know --print.
	if _, err := Parse(CmdStatus, []string{"--postgres-url", "postgres://x", "--json"}, nil, io.Discard); err != nil {
		t.Errorf("status: %v", err)
	}
	if _, err := Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--print"}, nil, io.Discard); err == nil {
		t.Error("run accepted --print")
	}
	if _, err := Parse("launch", nil, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "commands are run, check, setup, status") {
		t.Errorf("unknown command: %v", err)
	}
	for _, cmd := range Commands() {
		var out strings.Builder
		if _, err := Parse(cmd, []string{"--help"}, nil, &out); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		pg := strings.HasPrefix(cmd, "dlq ") || strings.Contains(out.String(), "--postgres-url (env OUTBOX_CDC_POSTGRES_URL, default \"\")") // the dlq commands need Kafka alone
		if !strings.Contains(out.String(), "Usage: outbox-cdc "+cmd) || !pg {
			t.Errorf("%s --help:\n%s", cmd, out.String())
		}
	}
}

func TestTablesFromFlagsAndConfigFile(t *testing.T) {
	path := t.TempDir() + "/outbox.yaml"
	err := os.WriteFile(path, []byte(`
tables:
  - table: billing.outbox
    topic: billing.{event_type}
    columns:
      aggregate_type: aggregatetype
      event_type: type
    header_columns: [tenant_id]
  - table: public.outbox
    header_columns: []
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--table", "public.outbox,orders", "--config", path,
		"--header-column", "correlation_id", "--header-column", "trace_parent:traceparent"}
	c, err := Parse(CmdRun, args, []string{"OUTBOX_CDC_HEADER_COLUMN=tenant_id:tenant"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.TableNames() != "public.outbox,public.orders,billing.outbox" {
		t.Fatalf("tables %s", c.TableNames())
	}
	pub, orders, billing := c.Relay.Tables[0], c.Relay.Tables[1], c.Relay.Tables[2]
	if len(pub.Columns.HeaderColumns) != 0 || pub.Route.Topic != "outbox.event.{aggregate_type}" {
		t.Errorf("public.outbox: the file's empty header_columns should win: %+v", pub)
	}
	// Env first, then the flags: both add to the list.
	if got := fmt.Sprint(orders.Columns.HeaderColumns); got != "[{tenant_id tenant} {correlation_id } {trace_parent traceparent}]" {
		t.Errorf("orders header columns %s", got)
	}
	if billing.Route.Topic != "billing.{event_type}" || billing.Columns.AggregateType != "aggregatetype" || billing.Columns.EventType != "type" ||
		billing.Columns.ID != "id" || fmt.Sprint(billing.Columns.HeaderColumns) != "[{tenant_id }]" {
		t.Errorf("billing.outbox %+v", billing)
	}

	// Without --table, the file's tables replace the default.
	c, err = Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--config", path}, nil, io.Discard)
	if err != nil || c.TableNames() != "billing.outbox,public.outbox" {
		t.Errorf("tables %s, %v", c.TableNames(), err)
	}
}

func TestTableAndEnvelopeUsage(t *testing.T) {
	base := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	bad := t.TempDir() + "/bad.yaml"
	_ = os.WriteFile(bad, []byte("tables:\n  - table: a.b\n    columns: {key: k}\n"), 0o600)
	tests := []struct {
		args []string
		want string
	}{
		{append(base, "--table", "a.b,a.b"), "a.b is listed twice"},
		{append(base, "--header-column", "x:id"), `header "id" is set by outbox-cdc itself`},
		{append(base, "--header-column", "a:h", "--header-column", "b:h"), `header "h" is given twice`},
		{append(base, "--envelope", "avro"), "want raw, cloudevents, cloudevents-structured or connect-json"},
		{append(base, "--connect-expand-payload"), "--connect-expand-payload needs --envelope=connect-json"},
		{append(base, "--cloudevents-source", "has space"), "want a URI-reference"},
		{append(base, "--cleanup", "truncate"), "want none, delete-after-publish or mark"},
		{append(base, "--cleanup", "mark"), "--cleanup=mark needs --mark COLUMN=VALUE"},
		{append(base, "--mark", "sent=true"), "--mark and --mark-dead need --cleanup=mark"},
		{append(base, "--cleanup", "mark", "--mark", "sent"), `"sent": want COLUMN=VALUE`},
		{append(base, "--cleanup", "mark", "--mark", "sent=yes"), "is none of now(), true, false, an integer or a 'quoted string'"},
		{append(base, "--cleanup", "mark", "--mark", "last_error=reason"), "is none of"},
		{append(base, "--topic-regex", "("), "--topic-regex"},
		{append(base, "--null-key", "maybe"), "want dead-letter or allow"},
		{append(base, "--table", "", "--message-prefix", ""), "relay messages alone with --table '' and a --message-prefix"},
		{append(base, "--message-prefix", "outbox-cdc.heartbeat"), "heartbeat prefix"},
		{append(base, "--table", "", "--cleanup", "delete-after-publish"), "messages leave no rows"},
		{append(base, "--config", bad), `unknown column key "key"`},
		{append(base, "--config", bad+".missing"), "--config"},
	}
	for _, tt := range tests {
		_, err := Parse(CmdRun, tt.args, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestConfigFileInJSON(t *testing.T) {
	path := t.TempDir() + "/outbox.json"
	if err := os.WriteFile(path, []byte(`{"tables": [{"table": "app.events", "columns": {"payload": "body"}, "header_columns": ["tenant_id:tenant"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--config", path}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if tb := c.Relay.Tables; c.TableNames() != "app.events" || tb[0].Columns.Payload != "body" || tb[0].Columns.HeaderColumns[0].Name() != "tenant" {
		t.Errorf("tables %+v", tb)
	}
}

func TestMessagesAlone(t *testing.T) {
	c, err := Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--table", ""},
		[]string{"OUTBOX_CDC_MESSAGE_PREFIX=billing"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Relay.Tables) != 0 || c.Relay.Messages.Prefix != "billing" {
		t.Errorf("tables %v, prefix %q: want none, and billing", c.Relay.Tables, c.Relay.Messages.Prefix)
	}
	for _, cmd := range []string{CmdSetup, CmdStatus} { // they create and read the (empty) publication
		if _, err := Parse(cmd, []string{"--postgres-url", "postgres://x", "--table", ""}, nil, io.Discard); err != nil {
			t.Errorf("%s with messages alone: %v", cmd, err)
		}
	}
}

// TestDefaultIsRunWithoutFlags: what a Go program starts from is what the
// binary runs with no flag, and validates once the two required are set.
func TestDefaultIsRunWithoutFlags(t *testing.T) {
	args := []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1"}
	parsed, err := Parse(CmdRun, args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d := relay.Default()
	if err := d.Validate(); err == nil {
		t.Error("relay.Default() validates without a URL and brokers")
	}
	d.PostgresURL, d.Kafka.Brokers = "postgres://x", []string{"k:1"}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", d) != fmt.Sprintf("%+v", parsed.Relay) {
		t.Errorf("relay.Default()\n %+v\nwant what Parse gives\n %+v", d, parsed.Relay)
	}
	if tc := d.Table("billing.events"); tc.Schema != "billing" || tc.Name != "events" || tc.Route.Topic != d.Defaults.Route.Topic || tc.Columns.Payload != "payload" {
		t.Errorf("Table(billing.events) = %+v", tc)
	}
}

func TestMarksAndKeys(t *testing.T) {
	c, err := Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--cleanup", "mark",
		"--mark", "status='Pub,lished'", "--mark", "published_at=now()", "--mark-dead", "last_error=reason",
		"--column-aggregate-id", "", "--column-aggregate-type", "", "--null-key", "allow", "--topic", "{topic}"},
		[]string{"OUTBOX_CDC_MARK_DEAD=status='Failed',attempts=3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	tb := c.Relay.Tables[0]
	if columns(tb.Mark) != "status|published_at" || columns(tb.MarkDead) != "last_error" {
		t.Errorf("mark %v, mark-dead %v (the flag wins over the environment)", tb.Mark, tb.MarkDead)
	}
	if tb.Columns.AggregateID != "" || tb.Columns.AggregateType != "" || !tb.Columns.NullKey {
		t.Errorf("columns %+v: want no aggregate columns, null keys allowed", tb.Columns)
	}
	c, err = Parse(CmdRun, []string{"--postgres-url", "postgres://x", "--kafka-brokers", "k:1", "--cleanup", "mark"},
		[]string{"OUTBOX_CDC_MARK=status='Failed, twice',attempts=3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Relay.Tables[0].Mark; columns(m) != "status|attempts" || fmt.Sprint(m[0]) != fmt.Sprint(mustSet(t, "status='Failed, twice'")) {
		t.Errorf("mark from the environment %v: commas inside quotes are kept", m)
	}
}

// columns are the columns sets set, |-separated.
func columns(sets []cleanup.Set) string {
	var cols []string
	for _, s := range sets {
		cols = append(cols, s.Column)
	}
	return strings.Join(cols, "|")
}

func mustSet(t *testing.T, s string) cleanup.Set {
	t.Helper()
	set, err := cleanup.ParseSet(s, false)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
