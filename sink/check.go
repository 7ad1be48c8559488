package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// CheckConfig is what Check looks at.
type CheckConfig struct {
	Brokers          []string
	Security         Security
	Templates        []string // the tables' topic templates, as written
	DeadLetterTopic  string   // empty: none
	CreateTopics     bool     // the relay creates missing topics (CreateTopics) as Spec says
	Spec             TopicSpec
	AutoCreateTopics bool // without CreateTopics: the broker may auto-create them
}

// Check inspects, without writing anything, whether the brokers can be
// reached and whether every topic the relay writes to exists or will be
// created. Each item carries the fix for what is wrong.
func Check(ctx context.Context, cfg CheckConfig) []checklist.Item {
	md, err := producer.Describe(ctx, cfg.Brokers, cfg.Security, checkedTopics(cfg))
	if err != nil {
		return []checklist.Item{{Name: "kafka reachable", Status: checklist.Fail, Detail: checklist.OneLine(err),
			Fix: producer.Hint(err, cfg.Security)}}
	}
	var items []checklist.Item
	add := func(s checklist.Status, name, detail, fix string) {
		items = append(items, checklist.Item{Name: name, Status: s, Detail: detail, Fix: fix})
	}
	add(checklist.OK, "kafka reachable", fmt.Sprintf("cluster %s, %d broker(s), %d topics", md.ClusterID, md.Brokers, md.Topics), "")

	brokerAuto, known := md.AutoCreate, md.AutoCreateKnown
	creates := cfg.CreateTopics || cfg.AutoCreateTopics && (brokerAuto || !known)
	partitions, replicas := md.Partitions, md.Replicas
	multi := md.Brokers > 1
	creator := "the broker creates it on first use"
	if cfg.CreateTopics {
		creator = "outbox-cdc creates it (" + cfg.Spec.String() + ")"
		if multi && (cfg.Spec.ReplicationFactor == 1 || cfg.Spec.Configs["min.insync.replicas"] == "1") {
			add(checklist.Warn, "topic settings", fmt.Sprintf("topics are created with %s: on %d brokers acks=all is then not durable", cfg.Spec, md.Brokers),
				"--topic-replication-factor 3 --topic-config min.insync.replicas=2")
		}
	}
	createFix := func(topic string) string {
		fix := fmt.Sprintf("create it: kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions 6 --replication-factor 3", cfg.Brokers[0], topic)
		if cfg.CreateTopics {
			return fix
		}
		return fix + " (or let outbox-cdc create it: --create-topics)"
	}
	topic := func(name, role string) {
		n, ok := partitions[name]
		switch {
		case ok:
			rf := replicas[name]
			minISR := md.MinInSync[name]
			detail := fmt.Sprintf("%s exists, %d partitions, replication factor %d, min.insync.replicas %s", name, n, rf, minISR)
			if multi && (rf <= 1 || minISR == "1") {
				add(checklist.Warn, role, detail+fmt.Sprintf(": on %d brokers acks=all is not durable (a write acknowledged by one replica can be lost with it)", md.Brokers),
					fmt.Sprintf("kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=2 (with replication factor 3)", cfg.Brokers[0], name))
			} else {
				add(checklist.OK, role, detail, "")
			}
		case creates:
			add(checklist.OK, role, fmt.Sprintf("%s does not exist yet; %s", name, creator), "")
		default:
			add(checklist.Fail, role, fmt.Sprintf("%s does not exist, and will not be created (%s)", name, creation(cfg.CreateTopics, cfg.AutoCreateTopics, brokerAuto)), createFix(name))
		}
	}
	for _, template := range cfg.Templates {
		checkTemplate(template, partitions, creates, topic, add, createFix, creation(cfg.CreateTopics, cfg.AutoCreateTopics, brokerAuto))
	}
	if cfg.DeadLetterTopic != "" {
		topic(cfg.DeadLetterTopic, "dead-letter topic")
	}
	return items
}

// checkedTopics returns the topics Check names one by one: each fixed
// template's and the dead-letter topic.
func checkedTopics(cfg CheckConfig) []string {
	var names []string
	for _, template := range cfg.Templates {
		if t, err := ParseTopic(template); err == nil {
			if name, fixed := t.Fixed(); fixed {
				names = append(names, name)
			}
		}
	}
	if cfg.DeadLetterTopic != "" {
		names = append(names, cfg.DeadLetterTopic)
	}
	return names
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

func creation(create, auto, broker bool) string {
	switch {
	case create:
		return "outbox-cdc creates it"
	case !auto:
		return "--create-topics=false"
	case !broker:
		return "--create-topics=false, and the brokers have auto.create.topics.enable=false"
	}
	return "auto-creation on"
}
