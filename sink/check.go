package sink

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// CheckConfig is what Check looks at.
type CheckConfig struct {
	Brokers          []string
	Security         Security
	Templates        []string // the tables' topic templates, as written
	DeadLetterTopic  string   // empty: none
	AutoCreateTopics bool
}

// Check inspects, without writing anything, whether the brokers can be
// reached and whether every topic the relay writes to exists or will be
// created. Each item carries the fix for what is wrong.
func Check(ctx context.Context, cfg CheckConfig) []checklist.Item {
	transport := cfg.Security.transport()
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: transport}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	md, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return []checklist.Item{{Name: "kafka reachable", Status: checklist.Fail, Detail: checklist.OneLine(err),
			Fix: hint(err, cfg.Security)}}
	}
	var items []checklist.Item
	add := func(s checklist.Status, name, detail, fix string) {
		items = append(items, checklist.Item{Name: name, Status: s, Detail: detail, Fix: fix})
	}
	add(checklist.OK, "kafka reachable", fmt.Sprintf("cluster %s, %d broker(s), %d topics", md.ClusterID, len(md.Brokers), len(md.Topics)), "")

	brokerAuto, known := autoCreateEnabled(ctx, client, md)
	creates := cfg.AutoCreateTopics && (brokerAuto || !known)
	partitions := map[string]int{}
	for _, t := range md.Topics {
		if t.Error == nil {
			partitions[t.Name] = len(t.Partitions)
		}
	}
	createFix := func(topic string) string {
		fix := fmt.Sprintf("create it: kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions 6 --replication-factor 3", cfg.Brokers[0], topic)
		if !cfg.AutoCreateTopics {
			return fix
		}
		return fix + " (or set auto.create.topics.enable=true on the brokers)"
	}
	topic := func(name, role string) {
		n, ok := partitions[name]
		switch {
		case ok:
			add(checklist.OK, role, fmt.Sprintf("%s exists, %d partitions", name, n), "")
		case creates:
			add(checklist.OK, role, fmt.Sprintf("%s does not exist yet; the broker creates it on first use", name), "")
		default:
			add(checklist.Fail, role, fmt.Sprintf("%s does not exist, and will not be created (%s)", name, creation(cfg.AutoCreateTopics, brokerAuto)), createFix(name))
		}
	}
	for _, template := range cfg.Templates {
		checkTemplate(template, partitions, creates, topic, add, createFix, creation(cfg.AutoCreateTopics, brokerAuto))
	}
	if cfg.DeadLetterTopic != "" {
		topic(cfg.DeadLetterTopic, "dead-letter topic")
	}
	return items
}

func checkTemplate(template string, partitions map[string]int, creates bool, topic func(name, role string),
	add func(s checklist.Status, name, detail, fix string), createFix func(string) string, why string) {
	t, err := ParseTopic(template)
	if err != nil {
		add(checklist.Fail, "event topics", err.Error(), "fix the topic template")
		return
	}
	if name, fixed := t.Fixed(); fixed {
		topic(name, "event topic")
	} else {
		prefix := t.prefix()
		var have []string
		for name := range partitions {
			if prefix != "" && strings.HasPrefix(name, prefix) {
				have = append(have, name)
			}
		}
		detail := fmt.Sprintf("%s names a topic per row; %d existing topics start with %q", template, len(have), prefix)
		if creates {
			add(checklist.OK, "event topics", detail+"; missing ones are created on first use", "")
		} else {
			add(checklist.Warn, "event topics", detail+"; missing ones are not created ("+why+"), so their rows are dead-lettered",
				createFix(strings.ReplaceAll(strings.ReplaceAll(template, "{", "<"), "}", ">")))
		}
	}
}

func creation(flag, broker bool) string {
	if !flag {
		return "--kafka-auto-create-topics=false"
	}
	if !broker {
		return "the brokers have auto.create.topics.enable=false"
	}
	return "auto-creation on"
}

// autoCreateEnabled reads auto.create.topics.enable from a broker; known is
// false when the broker would not say (no DescribeConfigs permission).
func autoCreateEnabled(ctx context.Context, client *kafka.Client, md *kafka.MetadataResponse) (enabled, known bool) {
	id := md.Controller.ID
	if len(md.Brokers) > 0 {
		id = md.Brokers[0].ID
	}
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(id), ConfigNames: []string{"auto.create.topics.enable"},
	}}})
	if err != nil || len(res.Resources) == 0 || res.Resources[0].Error != nil {
		return false, false
	}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigName == "auto.create.topics.enable" {
			return e.ConfigValue == "true", true
		}
	}
	return false, false
}
