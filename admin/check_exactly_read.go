package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

// How check reads, for exactly-once, what the brokers say: versions,
// configs, topics and ACLs (txnFacts). Nothing here writes or takes the
// transactional id.

// readTxnFacts asks the brokers of md what exactly-once depends on.
func readTxnFacts(ctx context.Context, client *kafka.Client, md *kafka.MetadataResponse, ckptTopic, txnID string) txnFacts {
	f := txnFacts{brokers: len(md.Brokers)}
	f.versions, f.versionErr = apiVersions(ctx, client, md.Brokers)
	f.configs, f.configErr = txnConfigs(ctx, client, md.Brokers)
	for _, t := range md.Topics {
		if t.Error != nil || len(t.Partitions) == 0 {
			continue
		}
		tf := topicFacts{exists: true, partitions: len(t.Partitions), replicas: len(t.Partitions[0].Replicas)}
		switch t.Name {
		case transactionStateLog:
			f.stateLog = tf
		case ckptTopic:
			tf.policy, tf.policyErr = topicPolicy(ctx, client, t.Name)
			f.checkpoint = tf
		}
	}
	f.acls, f.aclErr = transactionalIDACLs(ctx, client, txnID)
	return f
}

// apiVersions asks each broker which versions it answers, and returns for
// each API the highest version all of them answer (an API some broker
// lacks is left out): the coordinator may be any of them.
func apiVersions(ctx context.Context, client *kafka.Client, brokers []kafka.Broker) (map[protocol.ApiKey]int, error) {
	var common map[protocol.ApiKey]int
	for _, b := range brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		res, err := client.ApiVersions(ctx, &kafka.ApiVersionsRequest{Addr: kafka.TCP(addr)})
		if err == nil {
			err = res.Error
		}
		if err != nil {
			return nil, fmt.Errorf("api versions of broker %d (%s): %w", b.ID, addr, err)
		}
		have := map[protocol.ApiKey]int{}
		for _, k := range res.ApiKeys {
			have[protocol.ApiKey(k.ApiKey)] = k.MaxVersion
		}
		if common == nil {
			common = have
			continue
		}
		for k, v := range common {
			if hv, ok := have[k]; !ok {
				delete(common, k)
			} else {
				common[k] = min(v, hv)
			}
		}
	}
	return common, nil
}

// txnConfigs reads the transaction configs of every broker and keeps the
// strictest value of each: the highest replication factor and min.isr
// (the broker that creates the state log may be any), the lowest maximum
// timeout (the coordinator may be any).
func txnConfigs(ctx context.Context, client *kafka.Client, brokers []kafka.Broker) (map[string]int, error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, b := range brokers {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeBroker,
			ResourceName: strconv.Itoa(b.ID), ConfigNames: []string{cfgStateLogRF, cfgStateLogMinISR, cfgTxnMaxTimeoutMs}})
	}
	res, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe the brokers' configs: %w", err)
	}
	out := map[string]int{}
	for _, r := range res.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("configs of broker %s: %w", r.ResourceName, r.Error)
		}
		for _, e := range r.ConfigEntries {
			v, err := strconv.Atoi(e.ConfigValue)
			if err != nil {
				continue
			}
			old, seen := out[e.ConfigName]
			switch {
			case !seen:
				out[e.ConfigName] = v
			case e.ConfigName == cfgTxnMaxTimeoutMs:
				out[e.ConfigName] = min(old, v)
			default:
				out[e.ConfigName] = max(old, v)
			}
		}
	}
	return out, nil
}

// topicPolicy reads a topic's cleanup.policy.
func topicPolicy(ctx context.Context, client *kafka.Client, topic string) (string, error) {
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"cleanup.policy"},
	}}})
	if err == nil && len(res.Resources) == 0 {
		err = errors.New("no answer")
	}
	if err == nil {
		err = res.Resources[0].Error
	}
	if err != nil {
		return "", fmt.Errorf("cleanup.policy of %s: %w", topic, err)
	}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigName == "cleanup.policy" {
			return e.ConfigValue, nil
		}
	}
	return "delete", nil // Kafka's default, when the broker leaves it out
}

// transactionalIDACLs lists the ACLs that apply to the transactional id id
// (literal, prefixed and wildcard), of every principal: a filter on one
// principal would miss the grants to User:*. A cluster without an
// authorizer answers SECURITY_DISABLED.
func transactionalIDACLs(ctx context.Context, client *kafka.Client, id string) ([]aclEntry, error) {
	res, err := client.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: kafka.ACLFilter{
		ResourceTypeFilter: kafka.ResourceTypeTransactionalID, ResourceNameFilter: id, ResourcePatternTypeFilter: kafka.PatternTypeMatch,
		Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny,
	}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, err
	}
	var out []aclEntry
	for _, r := range res.Resources {
		for _, a := range r.ACLs {
			out = append(out, aclEntry{principal: a.Principal, op: a.Operation, allow: a.PermissionType == kafka.ACLPermissionTypeAllow})
		}
	}
	return out, nil
}

// principal is the Kafka principal the relay authenticates as, when the
// configuration says it (SASL's User:<name>); empty otherwise (a TLS
// client certificate's principal depends on the brokers' mapping rules).
func principal(cfg relay.Config) string {
	if cfg.Kafka.SASL.Mechanism == "" || cfg.Kafka.SASL.Username == "" {
		return ""
	}
	return "User:" + cfg.Kafka.SASL.Username
}
