package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestMetricsAndProbes inserts valid and invalid rows and checks that the
// scraped counters match what was inserted, that the gauges agree with
// pg_replication_slots, and that the probes answer.
func TestMetricsAndProbes(t *testing.T) {
	o := newOutbox(t, "metrics", looseColumns)
	// Topics made beforehand and their leaders known: no produce is retried
	// while a new topic elects its leaders, so records sent are counted
	// exactly (a retry resends its whole batch).
	createTopics(t, o.name+".order", o.name+".customer", o.name+".dlq")
	waitLeaders(t, o.name+".order", o.name+".customer", o.name+".dlq")
	r := startRelay(t, o.args("--dlq-topic", o.name+".dlq", "--heartbeat-interval", "1s")...)
	addr := r.HTTPAddr(t)

	w, counters := newWritten(), map[string]int{}
	insertRows(t, o, w, makeRows(300, 10, "order", counters), 25)
	insertRows(t, o, w, makeRows(200, 10, "customer", counters), 20)
	o.insertOne(t, uuid.NewString(), "order", nil, "created", `{}`, nil)
	o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{}`, `["not", "an", "object"]`)
	o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{}`, `"string"`)
	consume(t, []string{o.name + ".order", o.name + ".customer"}, 500, time.Minute)
	consume(t, []string{o.name + ".dlq"}, 3, time.Minute)
	waitConfirmed(t, o, o.CurrentLSN(t), 30*time.Second)

	// Counters settle with the acks; the slot gauges with the next poll.
	var m testkit.Metrics
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, body = testkit.Scrape(t, addr)
		settled := m[`outbox_cdc_events_published_total{topic="`+o.name+`.order"}`] == 300 &&
			m[`outbox_cdc_events_published_total{topic="`+o.name+`.customer"}`] == 200 &&
			m[`outbox_cdc_in_flight_events`] == 0 && m[`outbox_cdc_slot_lag_bytes`] < 1<<20 && m["outbox_cdc_slot_active"] == 1 &&
			pglsn(m["outbox_cdc_confirmed_lsn"]) == o.Confirmed(t)
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	want := map[string]float64{
		`outbox_cdc_events_published_total{topic="` + o.name + `.order"}`:    300,
		`outbox_cdc_events_published_total{topic="` + o.name + `.customer"}`: 200,
		`outbox_cdc_events_dead_lettered_total{reason="null_column"}`:        1,
		`outbox_cdc_events_dead_lettered_total{reason="invalid_headers"}`:    2,
		`outbox_cdc_event_latency_seconds_count`:                             500,
		`outbox_cdc_in_flight_events`:                                        0,
		`outbox_cdc_in_flight_bytes`:                                         0,
		`outbox_cdc_streaming`:                                               1,
		`outbox_cdc_slot_active`:                                             1,
		`outbox_cdc_slot_wal_status{status="reserved"}`:                      1,
		`outbox_cdc_slot_wal_status{status="lost"}`:                          0,
		`outbox_cdc_slot_safe_wal_size_bytes`:                                -1, // max_slot_wal_keep_size unlimited
		`outbox_cdc_reconnects_total`:                                        0,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if c := o.Confirmed(t); pglsn(m["outbox_cdc_confirmed_lsn"]) != c {
		t.Errorf("outbox_cdc_confirmed_lsn %s, slot confirmed_flush_lsn %s", pglsn(m["outbox_cdc_confirmed_lsn"]), c)
	}
	if m["outbox_cdc_received_lsn"] < m["outbox_cdc_confirmed_lsn"] {
		t.Errorf("received %s below confirmed %s", pglsn(m["outbox_cdc_received_lsn"]), pglsn(m["outbox_cdc_confirmed_lsn"]))
	}
	// Produce requests: every event and dead letter went in one (a retry
	// would send its batch again: none is expected on topics that exist), and
	// the batch histogram has one sample per request.
	if req, rec := m["outbox_cdc_produce_requests_total"], m["outbox_cdc_produce_records_total"]; req < 1 || rec != 503 {
		t.Errorf("%v produce requests carrying %v records; want at least one, and the 503 records (%v failed attempts)", req, rec, m[`outbox_cdc_publish_errors_total{kind="not_leader_for_partition"}`])
	}
	if n, req := m["outbox_cdc_produce_batch_messages_count"], m["outbox_cdc_produce_requests_total"]; n != req {
		t.Errorf("batch histogram has %v samples for %v requests", n, req)
	}
	if m["outbox_cdc_produce_batch_messages_sum"] != m["outbox_cdc_produce_records_total"] {
		t.Errorf("batch histogram sums to %v records, the counter says %v", m["outbox_cdc_produce_batch_messages_sum"], m["outbox_cdc_produce_records_total"])
	}
	if m["outbox_cdc_kafka_sent_bytes_total"] < 500*50 {
		t.Errorf("outbox_cdc_kafka_sent_bytes_total %v: less than the events' own bytes", m["outbox_cdc_kafka_sent_bytes_total"])
	}
	// The histogram's buckets are cumulative: every event is in +Inf.
	if b := m[`outbox_cdc_event_latency_seconds_bucket{le="+Inf"}`]; b != 500 {
		t.Errorf("latency +Inf bucket %v, want 500", b)
	}
	// The version label is what `outbox-cdc version` prints: "dev" from a
	// build with -buildvcs=false, a pseudo-version from a stock go build in
	// a checkout.
	if v := binaryVersion(t); m["outbox_cdc_build_info{goversion=\""+goVersion(body)+"\",version=\""+v+"\"}"] != 1 {
		t.Errorf("no build_info sample with version %q", v)
	}
	t.Logf("scraped: published order %v customer %v, dead-lettered %v+%v, latency count %v sum %.3fs, batches %v, slot lag %v bytes",
		m[`outbox_cdc_events_published_total{topic="`+o.name+`.order"}`], m[`outbox_cdc_events_published_total{topic="`+o.name+`.customer"}`],
		m[`outbox_cdc_events_dead_lettered_total{reason="null_column"}`], m[`outbox_cdc_events_dead_lettered_total{reason="invalid_headers"}`],
		m["outbox_cdc_event_latency_seconds_count"], m["outbox_cdc_event_latency_seconds_sum"], m["outbox_cdc_produce_batch_messages_count"],
		m["outbox_cdc_slot_lag_bytes"])
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "outbox_cdc_") && !strings.Contains(line, "_bucket") {
			t.Log(line)
		}
	}

	if code, _ := testkit.Get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := testkit.Get(t, "http://"+addr+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	// One line per state change, never one per event at info level.
	if n := r.countLines("level=INFO"); n > 12 {
		b, _ := os.ReadFile(r.log)
		t.Errorf("%d info lines for 503 events; want a handful:\n%s", n, b)
	}
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// pglsn turns a metric value back into an LSN.
func pglsn(v float64) pglogrepl.LSN { return pglogrepl.LSN(uint64(v)) }

// binaryVersion is the version the test binary says it is.
func binaryVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", binary, err)
	}
	f := strings.Fields(string(out)) // outbox-cdc VERSION (commit …)
	if len(f) < 2 {
		t.Fatalf("%s version printed %q", binary, out)
	}
	return f[1]
}

func goVersion(body string) string {
	m := regexp.MustCompile(`goversion="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// waitReady polls /readyz until it answers want, and returns the body.
func waitReady(t *testing.T, addr string, want int, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := testkit.Get(t, "http://"+addr+"/readyz")
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answered %d %q for %s, want %d", code, body, within, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitLeaders waits until every partition of topics has a leader.
func waitLeaders(t *testing.T, topics ...string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: topics})
		ready := err == nil && len(md.Topics) == len(topics)
		for _, tp := range md.Topics {
			ready = ready && tp.Error == nil && len(tp.Partitions) > 0
			for _, p := range tp.Partitions {
				ready = ready && p.Error == nil && p.Leader.ID >= 0 && p.Leader.Host != ""
			}
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics %v have no leaders after 30s: %v", topics, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
