package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// txnID is the default transactional id of exactlyConfig's database and slot.
const txnID = "outbox-cdc.<system identifier>.outbox_cdc" // the default id's pattern: no Postgres answers here

// exactlyConfig is an exactly-once configuration for brokers, with change
// applied.
func exactlyConfig(brokers []string, change func(*relay.Config)) relay.Config {
	return config(func(c *relay.Config) {
		c.PostgresURL, c.Kafka.Brokers, c.Delivery.Mode = "postgres://relay@127.0.0.1:1/app", brokers, relay.ExactlyOnce
		if change != nil {
			change(c)
		}
	})
}

// newExactlyCluster is a kfake cluster of n brokers started with opts.
func newExactlyCluster(t *testing.T, n int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(n)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// runCheckExactly runs checkExactly on cfg and returns its items by name.
func runCheckExactly(t *testing.T, cfg relay.Config) map[string]checklist.Item {
	t.Helper()
	sec, err := cfg.Security()
	if err != nil {
		t.Fatal(err)
	}
	items := checkExactly(context.Background(), cfg, sec)
	out := map[string]checklist.Item{}
	for _, it := range items {
		t.Logf("[%-4s] %s: %s (fix: %s)", it.Status, it.Name, it.Detail, it.Fix)
		out[it.Name] = it
	}
	if len(items) != 5 || len(out) != 5 {
		t.Fatalf("%d items, %d names; want 5", len(items), len(out))
	}
	return out
}

// want asserts an item's status, and that its detail and fix hold each of
// parts.
func want(t *testing.T, it checklist.Item, status checklist.Status, parts ...string) {
	t.Helper()
	if it.Status != status {
		t.Errorf("%s: status %s, want %s (%s)", it.Name, it.Status, status, it.Detail)
	}
	for _, p := range parts {
		if !strings.Contains(it.Detail+" | "+it.Fix, p) {
			t.Errorf("%s: %q | %q lacks %q", it.Name, it.Detail, it.Fix, p)
		}
	}
}

// answerBrokerConfigs makes cluster answer every DescribeConfigs of broker
// resources with configs (kfake knows no transaction.state.log.*).
func answerBrokerConfigs(cluster *kfake.Cluster, configs map[string]string) {
	cluster.ControlKey(int16(kmsg.DescribeConfigs), func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := r.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			if rr.ResourceType != kmsg.ConfigResourceTypeBroker {
				return nil, nil, false
			}
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			for k, v := range configs {
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = k, kmsg.StringPtr(v)
				res.Configs = append(res.Configs, c)
			}
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
}

// answerNoAuthorizer makes cluster answer DescribeAcls as a broker without
// an authorizer does (kfake without ACLs answers with none instead).
func answerNoAuthorizer(cluster *kfake.Cluster) {
	cluster.ControlKey(int16(kmsg.DescribeACLs), func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		resp := r.(*kmsg.DescribeACLsRequest).ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = int16(kafka.SecurityDisabled)
		return resp, nil, true
	})
}

// TestCheckExactlyKfake runs the items against kfake clusters: a healthy
// one, a state log too replicated for its brokers with a timeout above the
// brokers' maximum and an uncompacted checkpoint topic, and old brokers.
func TestCheckExactlyKfake(t *testing.T) {
	t.Run("healthy, three brokers", func(t *testing.T) {
		cluster := newExactlyCluster(t, 3, kfake.SeedTopics(1, "outbox_cdc.checkpoints"))
		answerBrokerConfigs(cluster, map[string]string{cfgStateLogRF: "3", cfgStateLogMinISR: "2", cfgTxnMaxTimeoutMs: "900000"})
		answerNoAuthorizer(cluster)
		alterConfig(t, cluster, "outbox_cdc.checkpoints", "cleanup.policy", "compact")
		items := runCheckExactly(t, exactlyConfig(cluster.ListenAddrs(), nil))
		want(t, items["transaction support"], checklist.OK, "InitProducerId v", "EndTxn v", "on every broker (3)")
		want(t, items["transaction state log"], checklist.OK, "does not exist yet", "replication factor 3", "min.isr 2")
		want(t, items["transaction timeout"], checklist.OK, "--transaction-timeout 1m0s, within", "900000 (15m0s)")
		want(t, items["checkpoint topic"], checklist.OK, "outbox_cdc.checkpoints exists, compacted, 1 partition(s)")
		want(t, items["transactional id ACLs"], checklist.OK, "no authorizer", txnID)
	})
	t.Run("broken", func(t *testing.T) {
		cluster := newExactlyCluster(t, 1, kfake.SeedTopics(1, "ckpt"))
		answerBrokerConfigs(cluster, map[string]string{cfgStateLogRF: "3", cfgStateLogMinISR: "2", cfgTxnMaxTimeoutMs: "60000"})
		items := runCheckExactly(t, exactlyConfig(cluster.ListenAddrs(), func(c *relay.Config) {
			c.Delivery.CheckpointTopic, c.Delivery.TransactionTimeout, c.Delivery.TransactionalID = "ckpt", 2*time.Minute, "my-id"
		}))
		want(t, items["transaction state log"], checklist.Fail, "replication.factor=3 on 1 broker(s)", "COORDINATOR_NOT_AVAILABLE",
			"transaction.state.log.replication.factor=1")
		want(t, items["transaction timeout"], checklist.Fail, "2m0s exceeds", "INVALID_TRANSACTION_TIMEOUT", "--transaction-timeout 1m0s or less")
		want(t, items["checkpoint topic"], checklist.Fail, "ckpt has cleanup.policy=delete", "--add-config cleanup.policy=compact")
		// kfake answers DescribeAcls with no ACL, as a cluster with an
		// authorizer and no grant would.
		want(t, items["transactional id ACLs"], checklist.Warn, "no ACL lets the relay's principal write TransactionalId my-id",
			"--transactional-id my-id", "no IDEMPOTENT_WRITE on the cluster (Kafka 3.0 or later)")
	})
	t.Run("Kafka 2.4, configs not readable, no checkpoint topic", func(t *testing.T) {
		cluster := newExactlyCluster(t, 1, kfake.MaxVersions(kversion.V2_4_0()))
		items := runCheckExactly(t, exactlyConfig(cluster.ListenAddrs(), func(c *relay.Config) { c.Delivery.CheckpointReplicationFactor = 3 }))
		want(t, items["transaction support"], checklist.Warn, "InitProducerId v2", "KIP-360", "Kafka 2.5 or later")
		want(t, items["transaction state log"], checklist.Warn, "could not be read", "at most the broker count (1)")
		want(t, items["transaction timeout"], checklist.OK, "900000") // kfake answers this one
		want(t, items["checkpoint topic"], checklist.Fail, "cannot be created with --checkpoint-replication-factor 3 on 1 broker(s)")
		want(t, items["transactional id ACLs"], checklist.Warn, "IDEMPOTENT_WRITE on the cluster (these brokers are older than Kafka 3.0)")
	})
}

// alterConfig sets one config of topic on cluster.
func alterConfig(t *testing.T, cluster *kfake.Cluster, topic, name, value string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(cluster.ListenAddrs()...), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
	defer client.Transport.(*kafka.Transport).CloseIdleConnections()
	res, err := client.IncrementalAlterConfigs(context.Background(), &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: name, Value: value, ConfigOperation: kafka.ConfigOperationSet}},
	}}})
	if err == nil && len(res.Resources) == 1 {
		err = res.Resources[0].Error
	}
	if err != nil {
		t.Fatalf("set %s=%s on %s: %v", name, value, topic, err)
	}
}

// TestCheckExactlyACLs: with an authorizer, a SASL principal granted WRITE
// on the transactional id passes; one that may not describe the ACLs is
// told what it needs.
func TestCheckExactlyACLs(t *testing.T) {
	grant := kfake.ACL{Resource: kmsg.ACLResourceTypeTransactionalId, Name: txnID, Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Operation: kmsg.ACLOperationWrite, Allow: true}
	describe := kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Operation: kmsg.ACLOperationDescribe, Allow: true}
	cluster := newExactlyCluster(t, 1, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "relay", "pw", grant, describe), kfake.User("PLAIN", "other", "pw", describe), kfake.User("PLAIN", "blind", "pw"))
	as := func(user string) relay.Config {
		return exactlyConfig(cluster.ListenAddrs(), func(c *relay.Config) {
			c.Kafka.SASL, c.Kafka.SASLAllowPlaintext = sink.SASL{Mechanism: "plain", Username: user, Password: "pw"}, true
		})
	}
	want(t, runCheckExactly(t, as("relay"))["transactional id ACLs"], checklist.OK, "User:relay may write TransactionalId "+txnID)
	want(t, runCheckExactly(t, as("other"))["transactional id ACLs"], checklist.Warn, "no ACL lets User:other write",
		"--allow-principal User:other --operation Write --operation Describe --transactional-id "+txnID)
	items := runCheckExactly(t, as("blind"))
	want(t, items["transactional id ACLs"], checklist.Warn, "cannot verify", "User:blind needs WRITE and DESCRIBE on TransactionalId "+txnID,
		"READ and WRITE on topic outbox_cdc.checkpoints")
	want(t, items["transaction timeout"], checklist.Warn, "could not be read", "DESCRIBE_CONFIGS")
}

// TestJudgeACLs covers what kfake cannot answer: DENY ACLs, wildcard
// principals, and a principal check cannot know.
func TestJudgeACLs(t *testing.T) {
	allow := func(p string, op producer.ACLOperation) producer.ACL {
		return producer.ACL{Principal: p, Operation: op, Allow: true}
	}
	tests := []struct {
		name      string
		principal string
		acls      []producer.ACL
		err       error
		status    checklist.Status
		part      string
	}{
		{"no authorizer", "", nil, producer.ErrNoAuthorizer, checklist.OK, "no authorizer"},
		{"not allowed to describe", "User:r", nil, kafka.ClusterAuthorizationFailed, checklist.Warn, "cannot verify"},
		{"wildcard principal, ALL", "User:r", []producer.ACL{allow("User:*", producer.ACLOperationAll)}, nil, checklist.OK, "User:r may write"},
		{"another principal's grant", "User:r", []producer.ACL{allow("User:x", producer.ACLOperationWrite)}, nil, checklist.Warn, "no ACL lets User:r"},
		{"describe alone", "User:r", []producer.ACL{allow("User:r", producer.ACLOperationDescribe)}, nil, checklist.Warn, "no ACL lets User:r"},
		{"deny wins", "User:r", []producer.ACL{allow("User:r", producer.ACLOperationWrite), {Principal: "User:r", Operation: producer.ACLOperationDescribe}},
			nil, checklist.Fail, "denies User:r Describe"},
		{"unknown principal", "", []producer.ACL{allow("User:a", producer.ACLOperationWrite), allow("User:b", producer.ACLOperationAll)},
			nil, checklist.OK, "ACLs let User:a, User:b write"},
	}
	versions := map[producer.APIKey]int{apiListTransactions: 0}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := judgeACLs(txnFacts{TxnSupport: producer.TxnSupport{Versions: versions}, bootstrap: "b:9092", acls: tt.acls, aclErr: tt.err}, "id", tt.principal, "ckpt")
			want(t, it, tt.status, tt.part)
		})
	}
}

// TestJudgeStateLog covers an existing state log, whose replicas count
// rather than the configs.
func TestJudgeStateLog(t *testing.T) {
	tests := []struct {
		name   string
		f      producer.TxnSupport
		status checklist.Status
		part   string
	}{
		{"exists, 3 replicas, min.isr 2", producer.TxnSupport{Brokers: 3, Configs: map[string]int{cfgStateLogRF: 5, cfgStateLogMinISR: 2},
			StateLog: producer.TopicState{Exists: true, Partitions: 50, Replicas: 3}}, checklist.OK, "exists, 50 partitions, replication factor 3"},
		{"exists, 1 replica on 3 brokers", producer.TxnSupport{Brokers: 3, Configs: map[string]int{cfgStateLogMinISR: 1},
			StateLog: producer.TopicState{Exists: true, Partitions: 50, Replicas: 1}}, checklist.Warn, "one broker down"},
		{"exists, configs unreadable", producer.TxnSupport{Brokers: 1, ConfigErr: errors.New("denied"),
			StateLog: producer.TopicState{Exists: true, Partitions: 50, Replicas: 1}}, checklist.OK, "exists"},
		{"one broker, 1 and 1", producer.TxnSupport{Brokers: 1, Configs: map[string]int{cfgStateLogRF: 1, cfgStateLogMinISR: 1}}, checklist.OK, "does not exist yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { want(t, judgeStateLog(txnFacts{TxnSupport: tt.f}), tt.status, tt.part) })
	}
}

// TestCheckExactlyOnlyWithExactlyOnce: at-least-once adds no item.
func TestCheckExactlyOnlyWithExactlyOnce(t *testing.T) {
	cfg := exactlyConfig([]string{"127.0.0.1:1"}, func(c *relay.Config) { c.Delivery.Mode = relay.AtLeastOnce })
	if items := checkExactly(context.Background(), cfg, sink.Security{}); items != nil {
		t.Errorf("at-least-once: %+v", items)
	}
	if got := setupCheckpointTopic(cfg); got != nil {
		t.Errorf("at-least-once setup topics: %+v", got)
	}
}

// TestSetupCheckpointTopic: setup plans the checkpoint topic with
// exactly-once, whatever --create-topics says, creates it compacted once,
// and refuses one that exists uncompacted.
func TestSetupCheckpointTopic(t *testing.T) {
	cluster := newExactlyCluster(t, 1, kfake.SeedTopics(1, "plain"))
	cfg := exactlyConfig(cluster.ListenAddrs(), func(c *relay.Config) { c.Topics.Create = false })
	p, err := Plan(context.Background(), cfg, "", nil)
	if err != nil || len(p.Topics) != 1 || p.Topics[0].Name != relay.DefaultCheckpointTopic ||
		p.Topics[0].Spec.String() != "partitions 1, replication factor the broker's default, cleanup.policy=compact" {
		t.Fatalf("plan topics %+v, %v", p.Topics, err)
	}
	topics := SetupPlan{Topics: p.Topics}
	for _, created := range []bool{true, false} {
		done, err := Apply(context.Background(), cfg, topics, nil)
		if err != nil || len(done.Topics) != 1 || done.Topics[0].Created != created {
			t.Fatalf("apply: %+v, %v; want created %v", done, err, created)
		}
	}
	client := producer.Connect(sink.Security{}, cluster.ListenAddrs(), 10*time.Second)
	defer client.Close()
	if f, err := client.ReadTxnSupport(context.Background(), relay.DefaultCheckpointTopic); err != nil || f.Checkpoint.Policy != "compact" {
		t.Errorf("created topic's cleanup.policy %q, %v (%v)", f.Checkpoint.Policy, err, f.Checkpoint.PolicyErr)
	}
	cfg.Delivery.CheckpointTopic = "plain"
	if _, err := Apply(context.Background(), cfg, SetupPlan{Topics: setupCheckpointTopic(cfg)}, nil); !errors.Is(err, checkpoint.ErrNotCompacted) {
		t.Errorf("apply on an uncompacted topic: %v, want ErrNotCompacted", err)
	}
}
