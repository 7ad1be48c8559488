package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// How check reads, for exactly-once, what the brokers say: versions,
// configs, topics and ACLs. Nothing here writes or takes the
// transactional id: an InitProducerId would fence the instance running
// with it. admin judges what these read.

// TransactionStateLog is the internal topic transaction coordinators keep
// their state in; the first FindCoordinator for a transactional id
// creates it.
const TransactionStateLog = "__transaction_state"

// The broker configs ReadTxnSupport reads.
const (
	ConfigStateLogRF      = "transaction.state.log.replication.factor"
	ConfigStateLogMinISR  = "transaction.state.log.min.isr"
	ConfigTxnMaxTimeoutMs = "transaction.max.timeout.ms"
)

// APIKey is a Kafka request type, numbered as the protocol numbers it.
type APIKey int16

// The requests whose support ReadTxnSupport reports.
const (
	APIFindCoordinator    APIKey = APIKey(protocol.FindCoordinator)
	APIInitProducerID     APIKey = APIKey(protocol.InitProducerId)
	APIAddPartitionsToTxn APIKey = APIKey(protocol.AddPartitionsToTxn)
	APIEndTxn             APIKey = APIKey(protocol.EndTxn)
	// APIListTransactions is ListTransactions (KIP-664), which brokers
	// answer from Kafka 3.0.
	APIListTransactions APIKey = 66
)

// String is the request's name in the protocol ("InitProducerId").
func (k APIKey) String() string { return protocol.ApiKey(k).String() }

// ACLOperation is what an ACL allows or denies, numbered as the protocol
// numbers it.
type ACLOperation int8

// The operations check judges the transactional id's ACLs by.
const (
	ACLOperationAll      = ACLOperation(kafka.ACLOperationTypeAll)
	ACLOperationWrite    = ACLOperation(kafka.ACLOperationTypeWrite)
	ACLOperationDescribe = ACLOperation(kafka.ACLOperationTypeDescribe)
)

// String is the operation's name ("Write").
func (op ACLOperation) String() string { return kafka.ACLOperationType(op).String() }

// ErrNoAuthorizer is the answer to DescribeAcls of a cluster without an
// authorizer (SECURITY_DISABLED): any client may do anything.
var ErrNoAuthorizer error = kafka.SecurityDisabled

// TxnSupport is what the brokers say of what exactly-once depends on.
type TxnSupport struct {
	Brokers int
	// Versions is the highest version every broker answers of each API;
	// an API some broker lacks is absent.
	Versions   map[APIKey]int
	VersionErr error
	// Configs are the brokers' transaction configs (Config*), the
	// strictest value among them; a config not read is absent.
	Configs    map[string]int
	ConfigErr  error
	StateLog   TopicState // TransactionStateLog
	Checkpoint TopicState
}

// TopicState is what metadata and configs say of one topic.
type TopicState struct {
	Exists               bool
	Partitions, Replicas int
	Policy               string // cleanup.policy, read for the checkpoint topic only
	PolicyErr            error
}

// ACL is one ACL of a TransactionalId resource.
type ACL struct {
	Principal string
	Operation ACLOperation
	Allow     bool
}

// ReadTxnSupport asks the brokers what exactly-once depends on, with
// ckptTopic the checkpoint topic. It fails only when the brokers cannot
// be reached (their metadata); what else it cannot read it says in the
// fields' errors.
func (c *Cluster) ReadTxnSupport(ctx context.Context, ckptTopic string) (TxnSupport, error) {
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return TxnSupport{}, fmt.Errorf("kafka metadata: %w", err)
	}
	f := TxnSupport{Brokers: len(md.Brokers)}
	f.Versions, f.VersionErr = c.apiVersions(ctx, md.Brokers)
	f.Configs, f.ConfigErr = c.txnConfigs(ctx, md.Brokers)
	for _, t := range md.Topics {
		if t.Error != nil || len(t.Partitions) == 0 {
			continue
		}
		tf := TopicState{Exists: true, Partitions: len(t.Partitions), Replicas: len(t.Partitions[0].Replicas)}
		switch t.Name {
		case TransactionStateLog:
			f.StateLog = tf
		case ckptTopic:
			tf.Policy, tf.PolicyErr = c.topicPolicy(ctx, t.Name)
			f.Checkpoint = tf
		}
	}
	return f, nil
}

// apiVersions asks each broker which versions it answers, and returns for
// each API the highest version all of them answer (an API some broker
// lacks is left out): the coordinator may be any of them.
func (c *Cluster) apiVersions(ctx context.Context, brokers []kafka.Broker) (map[APIKey]int, error) {
	var common map[APIKey]int
	for _, b := range brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		res, err := c.client.ApiVersions(ctx, &kafka.ApiVersionsRequest{Addr: kafka.TCP(addr)})
		if err == nil {
			err = res.Error
		}
		if err != nil {
			return nil, fmt.Errorf("api versions of broker %d (%s): %w", b.ID, addr, err)
		}
		have := map[APIKey]int{}
		for _, k := range res.ApiKeys {
			have[APIKey(k.ApiKey)] = k.MaxVersion
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
func (c *Cluster) txnConfigs(ctx context.Context, brokers []kafka.Broker) (map[string]int, error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, b := range brokers {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeBroker,
			ResourceName: strconv.Itoa(b.ID), ConfigNames: []string{ConfigStateLogRF, ConfigStateLogMinISR, ConfigTxnMaxTimeoutMs}})
	}
	res, err := c.client.DescribeConfigs(ctx, req)
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
			case e.ConfigName == ConfigTxnMaxTimeoutMs:
				out[e.ConfigName] = min(old, v)
			default:
				out[e.ConfigName] = max(old, v)
			}
		}
	}
	return out, nil
}

// topicPolicy reads a topic's cleanup.policy.
func (c *Cluster) topicPolicy(ctx context.Context, topic string) (string, error) {
	res, err := c.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
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

// TransactionalIDACLs lists the ACLs that apply to the transactional id id
// (literal, prefixed and wildcard), of every principal: a filter on one
// principal would miss the grants to User:*. A cluster without an
// authorizer answers ErrNoAuthorizer.
func (c *Cluster) TransactionalIDACLs(ctx context.Context, id string) ([]ACL, error) {
	res, err := c.client.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: kafka.ACLFilter{
		ResourceTypeFilter: kafka.ResourceTypeTransactionalID, ResourceNameFilter: id, ResourcePatternTypeFilter: kafka.PatternTypeMatch,
		Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny,
	}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, err
	}
	var out []ACL
	for _, r := range res.Resources {
		for _, a := range r.ACLs {
			out = append(out, ACL{Principal: a.Principal, Operation: ACLOperation(a.Operation), Allow: a.PermissionType == kafka.ACLPermissionTypeAllow})
		}
	}
	return out, nil
}
