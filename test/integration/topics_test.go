package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// describeTopic reads a topic's partitions, replication factor and the
// given configs through the admin API.
func describeTopic(t *testing.T, brokers, topic string, configs ...string) (partitions, replication int, values map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second}
	var err error
	var md *kafka.MetadataResponse
	for {
		md, err = client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil && len(md.Topics[0].Partitions) > 0 {
			break
		}
		if ctx.Err() != nil { // a topic just created takes a moment to show
			t.Fatalf("metadata of %s: %v %+v", topic, err, md)
		}
		time.Sleep(200 * time.Millisecond)
	}
	partitions = len(md.Topics[0].Partitions)
	replication = len(md.Topics[0].Partitions[0].Replicas)
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: configs}}})
	if err != nil || len(res.Resources) != 1 {
		t.Fatalf("configs of %s: %v", topic, err)
	}
	values = map[string]string{}
	for _, e := range res.Resources[0].ConfigEntries {
		values[e.ConfigName] = e.ConfigValue
	}
	return partitions, replication, values
}

// TestTopicProvisioning runs against a broker with auto-creation off: the
// relay creates the dead-letter topic at start and each event topic on
// first use, with the partitions and configs asked for; a creation the
// broker refuses is one clear line, and the event is dead-lettered (dlq)
// or stops the relay unconfirmed (fail).
func TestTopicProvisioning(t *testing.T) {
	k, err := testkit.StartKafka("auto.create.topics.enable=false")
	if err != nil {
		t.Fatalf("start a broker with auto-creation off: %v", err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	o := newOutbox(t, "provision", defaultColumns)
	dlq := o.name + ".dlq"
	args := o.args("--kafka-brokers", k.Brokers, "--dlq-topic", dlq, "--topic-partitions", "5",
		"--topic-config", "retention.ms=3600000", "--topic-config", "cleanup.policy=delete")
	r := startRelay(t, args...)
	if n, rf, cfg := describeTopic(t, k.Brokers, dlq, "retention.ms"); n != 5 || rf != 1 || cfg["retention.ms"] != "3600000" {
		t.Errorf("dead-letter topic: %d partitions, replication %d, %v; want 5, 1, retention.ms=3600000", n, rf, cfg)
	}
	ids := []string{o.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{"n": 0}`, nil),
		o.insertOne(t, uuid.NewString(), "invoice", "i-1", "created", `{"n": 0}`, nil)}
	msgs := testkit.Consume(t, k.Brokers, []string{o.name + ".order", o.name + ".invoice"}, len(ids), time.Minute)
	if len(msgs) < len(ids) {
		t.Fatalf("%d of %d events arrived", len(msgs), len(ids))
	}
	for _, topic := range []string{o.name + ".order", o.name + ".invoice"} {
		if n, _, cfg := describeTopic(t, k.Brokers, topic, "retention.ms", "cleanup.policy"); n != 5 || cfg["retention.ms"] != "3600000" || cfg["cleanup.policy"] != "delete" {
			t.Errorf("%s: %d partitions, %v; want 5 and the configs asked for", topic, n, cfg)
		}
	}
	if code := r.Stop(t, 15, 30*time.Second); code != 0 {
		t.Fatalf("exit %d on SIGTERM", code)
	}

	// A replication factor the one broker cannot give: the dead-letter
	// topic exists, an event topic is refused and its event dead-lettered.
	refusing := append(append([]string(nil), args...), "--topic-replication-factor", "3")
	startRelay(t, refusing...)
	refused := o.insertOne(t, uuid.NewString(), "payment", "p-1", "created", `{}`, nil)
	dead := consumeNAt(t, k.Brokers, dlq, 1, time.Minute)
	if reason, _ := testkit.Header(dead[0], "outbox_cdc.reason"); reason != "topic_not_created" {
		t.Errorf("dead letter reason %q, want topic_not_created", reason)
	}
	if id, _ := testkit.Header(dead[0], "id"); id != refused {
		t.Errorf("dead letter of %s, want %s", id, refused)
	}
	if e, _ := testkit.Header(dead[0], "outbox_cdc.error"); !strings.Contains(e, "lower --topic-replication-factor") {
		t.Errorf("dead letter's error %q does not say what to fix", e)
	}

	// With --on-invalid=fail the relay stops there, without confirming it;
	// a new dead-letter topic it cannot create stops it at start.
	o2 := newOutbox(t, "provfail", defaultColumns)
	code, out := runOnce(t, o2.args("--kafka-brokers", k.Brokers, "--dlq-topic", o2.name+".dlq", "--topic-replication-factor", "3", "--http-addr", "")...)
	if code != 1 || !strings.Contains(lastLine(out), "dead-letter topic: ") || !strings.Contains(lastLine(out), "lower --topic-replication-factor") {
		t.Errorf("a dead-letter topic that cannot be created: exit %d, %q", code, lastLine(out))
	}
	r3 := startRelay(t, o2.args("--kafka-brokers", k.Brokers, "--on-invalid", "fail", "--topic-replication-factor", "3")...)
	o2.insertOne(t, uuid.NewString(), "order", "o-1", "created", `{}`, nil)
	end := o2.CurrentLSN(t)
	select {
	case <-r3.done:
	case <-time.After(time.Minute):
		t.Fatal("the relay did not stop on a topic it may not create, with --on-invalid=fail")
	}
	if got := o2.Confirmed(t); got >= end {
		t.Errorf("slot confirmed %s, past the event it could not publish (%s)", got, end)
	}

	// setup provisions the fixed and dead-letter topics ahead of time.
	fixed, dead3 := o2.name+".fixed", o2.name+".dlq3"
	setupArgs := []string{"setup", "--postgres-url", pg.URL, "--table", "public." + o2.name, "--publication", o2.name, "--slot", o2.name,
		"--kafka-brokers", k.Brokers, "--topic", fixed, "--dlq-topic", dead3, "--topic-partitions", "4", "--topic-config", "min.insync.replicas=1"}
	code, out = runOnce(t, append(setupArgs, "--print")...)
	if code != 0 || !strings.Contains(out, "-- kafka: create topic "+fixed+" (partitions 4, replication factor the broker's default, min.insync.replicas=1) unless it exists") {
		t.Errorf("setup --print (exit %d) does not list the topics:\n%s", code, out)
	}
	code, out = runOnce(t, setupArgs...)
	if code != 0 || !strings.Contains(out, "done: created topic "+fixed) || !strings.Contains(out, "done: created topic "+dead3) {
		t.Errorf("setup (exit %d) did not create the topics:\n%s", code, out)
	}
	if n, _, cfg := describeTopic(t, k.Brokers, fixed, "min.insync.replicas"); n != 4 || cfg["min.insync.replicas"] != "1" {
		t.Errorf("%s: %d partitions, %v; want 4, min.insync.replicas=1", fixed, n, cfg)
	}
	if code, out = runOnce(t, setupArgs...); code != 0 || !strings.Contains(out, "topic "+fixed+" exists") {
		t.Errorf("setup again (exit %d):\n%s", code, out)
	}
}

// TestPartitionsAdded grows a busy topic from 2 to 6 partitions: the relay
// notices, says so once, and never lets a key's event reach its new
// partition before the events queued for its old one are in: per key, the
// broker appended every event of the old partition no later than the first
// of the new (the topic stamps records with LogAppendTime).
func TestPartitionsAdded(t *testing.T) {
	o := newOutbox(t, "grow", defaultColumns)
	topic := o.name + ".order"
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second}
	res, err := client.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "LogAppendTime"}}}}})
	if err != nil || res.Errors[topic] != nil {
		t.Fatalf("create %s: %v %v", topic, err, res)
	}
	waitLeaders(t, topic)
	r := startRelay(t, o.args("--kafka-metadata-max-age", "1s")...)
	w, counters := newWritten(), map[string]int{}
	wait := insertInBackground(o, w, makeRows(12000, 20, "order", counters), 20, 10*time.Millisecond)
	consume(t, []string{topic}, 1500, time.Minute)
	cres, err := client.CreatePartitions(context.Background(), &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 6}}})
	if err != nil || cres.Errors[topic] != nil {
		t.Fatalf("create partitions: %v %v", err, cres)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	msgs := consume(t, []string{topic}, 12000, 2*time.Minute)
	checkDelivered(t, o, w, msgs)

	type span struct{ first, last time.Time }
	spans := map[string]map[int]*span{} // key → partition → append times
	for _, m := range msgs {
		k := string(m.Key)
		if spans[k] == nil {
			spans[k] = map[int]*span{}
		}
		s := spans[k][m.Partition]
		if s == nil {
			s = &span{m.Time, m.Time}
			spans[k][m.Partition] = s
		}
		if m.Time.Before(s.first) {
			s.first = m.Time
		}
		if m.Time.After(s.last) {
			s.last = m.Time
		}
	}
	moved := 0
	for k, parts := range spans {
		if len(parts) > 2 {
			t.Errorf("key %s in %d partitions", k, len(parts))
		}
		if len(parts) == 2 {
			moved++
			var ss []*span
			for _, s := range parts {
				ss = append(ss, s)
			}
			if ss[0].first.After(ss[1].first) {
				ss[0], ss[1] = ss[1], ss[0]
			}
			if ss[0].last.After(ss[1].first) {
				t.Errorf("key %s: appended to its new partition at %s, before the last of its old one (%s)", k, ss[1].first, ss[0].last)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to a new partition: the test proves nothing")
	}
	b, _ := os.ReadFile(r.log)
	if n := strings.Count(string(b), "partition count changed"); n != 1 {
		t.Errorf("%d log lines about the partition count, want 1", n)
	}
	m, _ := testkit.Scrape(t, r.HTTPAddr(t))
	if got := m[`outbox_cdc_partition_count_changes_total{topic="`+topic+`"}`]; got != 1 {
		t.Errorf("outbox_cdc_partition_count_changes_total = %v, want 1", got)
	}
	t.Logf("2 → 6 partitions under load: %d of %d keys moved, none overtook its old partition", moved, len(spans))
}
