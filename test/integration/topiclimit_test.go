package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestTopicLimit writes 10,000 distinct aggregate types with the default
// topic template: one in ten is outside the allow-list, and --max-topics
// caps the rest at 20 topics. Nothing is lost: every event is on its own
// topic or in the dead-letter topic with the reason of its refusal; 20
// event topics exist; the topics in use keep working after the cap is
// reached; and /metrics stays small.
func TestTopicLimit(t *testing.T) {
	const types, maxTopics = 10_000, 20
	o := newOutbox(t, "topiclimit", defaultColumns)
	dlq := o.name + ".dlq"
	allow := regexp.QuoteMeta(o.name) + `\.t[0-9]+` // not the dead-letter topic: it is never refused
	r := startRelay(t, o.args("--dlq-topic", dlq, "--topic-allow", allow, "--max-topics", fmt.Sprint(maxTopics),
		"--topic-partitions", "1")...)

	typeOf := map[string]string{} // event id → aggregate type
	rows := make([]row, 0, types)
	for i := range types {
		typ := fmt.Sprintf("t%05d", i)
		if i%10 == 0 {
			typ = fmt.Sprintf("x%05d", i) // outside the allow-list
		}
		id := uuid.NewString()
		typeOf[id] = typ
		rows = append(rows, row{ID: id, AggregateType: typ, AggregateID: fmt.Sprintf("a%d", i), EventType: "created", Payload: `{}`})
	}
	for start := 0; start < types; start += 2500 { // four transactions
		if err := o.insertTx(context.Background(), rows[start:start+2500], true); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	consumeN(t, dlq, types-maxTopics, time.Minute)
	topics := eventTopics(t, o.name, dlq)
	if len(topics) != maxTopics {
		t.Fatalf("%d event topics exist, want %d (--max-topics): %v", len(topics), maxTopics, topics)
	}
	used := checkTopicFates(t, o.name, typeOf, consume(t, append(topics, dlq), types, time.Minute))

	// The topics in use keep working; a new one is still refused.
	more := map[string]string{}
	for typ := range used {
		more[o.insertOne(t, uuid.NewString(), typ, "again", "updated", `{}`, nil)] = typ
	}
	more[o.insertOne(t, uuid.NewString(), "t99999", "again", "updated", `{}`, nil)] = "t99999"
	for id, typ := range more {
		typeOf[id] = typ
	}
	checkTopicFates(t, o.name, typeOf, consume(t, append(topics, dlq), len(typeOf), time.Minute))
	if topics := eventTopics(t, o.name, dlq); len(topics) != maxTopics {
		t.Errorf("%d event topics after the second round, want %d", len(topics), maxTopics)
	}
	checkTopicMetrics(t, r, 2*maxTopics, types-maxTopics-types/10+1, types/10)
	if n := strings.Count(r.LogText(), "the topic cap is reached"); n != 1 {
		t.Errorf("%d log lines say the cap is reached, want 1", n)
	}
}

// eventTopics lists the topics whose names start with prefix, but dlq. It
// asks the broker on a connection of its own: a kafka.Client answers a
// request for every topic from a metadata cache a few seconds old.
func eventTopics(t *testing.T, prefix, dlq string) []string {
	t.Helper()
	conn, err := kafka.Dial("tcp", broker.Brokers)
	if err != nil {
		t.Fatalf("dial %s: %v", broker.Brokers, err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions()
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		if strings.HasPrefix(p.Topic, prefix+".") && p.Topic != dlq && !seen[p.Topic] {
			seen[p.Topic] = true
			out = append(out, p.Topic)
		}
	}
	return out
}

// checkTopicFates checks that each event of typeOf is on the topic of its
// aggregate type, or dead-lettered with the reason of its refusal, and
// returns the aggregate types published to their topics.
func checkTopicFates(t *testing.T, prefix string, typeOf map[string]string, msgs []kafka.Message) map[string]bool {
	t.Helper()
	first, dups := byID(t, msgs)
	used := map[string]bool{}
	for id, typ := range typeOf {
		m, ok := first[id]
		reason, _ := testkit.Header(m, "outbox_cdc.reason")
		routed, _ := testkit.Header(m, "outbox_cdc.topic")
		want := "topic_limit"
		if typ[0] == 'x' {
			want = "topic_not_allowed"
		}
		switch {
		case !ok:
			t.Errorf("event %s (%s) lost", id, typ)
		case m.Topic == prefix+"."+typ:
			used[typ] = true
		case m.Topic != prefix+".dlq":
			t.Errorf("event %s (%s) on topic %s", id, typ, m.Topic)
		case reason != want || routed != prefix+"."+typ:
			t.Errorf("event %s (%s) dead-lettered as %q for %q, want %q for %s", id, typ, reason, routed, want, prefix+"."+typ)
		}
	}
	t.Logf("%d events: %d on %d topics of their own, the rest dead-lettered; %d duplicates", len(typeOf), len(first)-countOn(msgs, prefix+".dlq"), len(used), dups)
	return used
}

// countOn counts the messages on topic.
func countOn(msgs []kafka.Message, topic string) int {
	n := 0
	for _, m := range msgs {
		if m.Topic == topic {
			n++
		}
	}
	return n
}

// checkTopicMetrics waits for the counters to account for every event, and
// checks that /metrics holds a bounded number of series.
func checkTopicMetrics(t *testing.T, r *relay, published, limited, notAllowed int) {
	t.Helper()
	addr := r.HTTPAddr(t)
	var m testkit.Metrics
	var body string
	waitFor(t, r, 30*time.Second, "the metrics count every event", func() bool {
		m, body = testkit.Scrape(t, addr)
		sum := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, "outbox_cdc_events_published_total{") {
				sum += v
			}
		}
		return sum == float64(published) &&
			m[`outbox_cdc_events_dead_lettered_total{reason="topic_limit"}`] == float64(limited) &&
			m[`outbox_cdc_events_dead_lettered_total{reason="topic_not_allowed"}`] == float64(notAllowed)
	})
	series := 0
	for k := range m {
		if strings.HasPrefix(k, "outbox_cdc_events_published_total{") {
			series++
		}
	}
	if series > 20 || len(m) > 400 {
		t.Errorf("/metrics: %d series of events published, %d samples in all (%d bytes); want at most 20 and 400", series, len(m), len(body))
	}
	t.Logf("/metrics: %d series of events published, %d samples, %d bytes", series, len(m), len(body))
}
