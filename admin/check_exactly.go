package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// What exactly-once needs of a cluster, beyond what at-least-once does: a
// transaction coordinator (the APIs, and a transaction state log it can
// create and write), a transaction timeout the brokers accept, a compacted
// checkpoint topic, and the right to use the transactional id. check
// reads each without taking the transactional id: an InitProducerId would
// fence the instance running with it.

// transactionAPIs are the requests a transactional producer sends, in the
// order it sends them.
var transactionAPIs = []producer.APIKey{producer.APIFindCoordinator, producer.APIInitProducerID, producer.APIAddPartitionsToTxn, producer.APIEndTxn}

// apiListTransactions is ListTransactions (KIP-664), which brokers answer
// from Kafka 3.0: the release from which WRITE on a topic is enough for an
// idempotent producer (KIP-679), instead of IDEMPOTENT_WRITE on the cluster.
const apiListTransactions = producer.APIListTransactions

// transactionStateLog is the internal topic transaction coordinators keep
// their state in; the first FindCoordinator for a transactional id creates it.
const transactionStateLog = producer.TransactionStateLog

// Broker configs check reads for exactly-once.
const (
	cfgStateLogRF      = producer.ConfigStateLogRF
	cfgStateLogMinISR  = producer.ConfigStateLogMinISR
	cfgTxnMaxTimeoutMs = producer.ConfigTxnMaxTimeoutMs
)

// txnFacts is what check reads from the brokers for exactly-once
// (producer.Cluster's ReadTxnSupport and TransactionalIDACLs); the judge*
// functions turn it into items.
type txnFacts struct {
	producer.TxnSupport
	bootstrap string         // a broker, for the commands in fixes
	acls      []producer.ACL // the ACLs whose pattern matches the transactional id
	aclErr    error
}

// checkExactly is check's items for --delivery exactly-once (none for
// at-least-once): transaction support, the transaction state log, the
// transaction timeout, the checkpoint topic and the transactional id's ACLs.
func checkExactly(ctx context.Context, cfg relay.Config, sec sink.Security) []checklist.Item {
	if !cfg.Delivery.Exactly() || len(cfg.Kafka.Brokers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cluster := producer.Connect(sec, cfg.Kafka.Brokers, 10*time.Second)
	defer cluster.Close()
	support, err := cluster.ReadTxnSupport(ctx, cfg.Delivery.CheckpointTopic)
	if err != nil {
		return []checklist.Item{{Name: "exactly-once", Status: checklist.Skip, Detail: "not checked: kafka cannot be reached"}}
	}
	id := cfg.TransactionalID(systemID(ctx, cfg.PostgresURL))
	f := txnFacts{TxnSupport: support, bootstrap: cfg.Kafka.Brokers[0]}
	f.acls, f.aclErr = cluster.TransactionalIDACLs(ctx, id)
	d := cfg.Delivery
	return []checklist.Item{
		judgeAPIs(f),
		judgeStateLog(f),
		judgeTimeout(f, d.TransactionTimeout),
		judgeCheckpointTopic(f, d.CheckpointTopic, d.CheckpointReplicationFactor),
		judgeACLs(f, id, principal(cfg), d.CheckpointTopic),
	}
}

// setupCheckpointTopic is the checkpoint topic setup creates with
// exactly-once, as run does. Its Spec says what matters to an operator;
// producer.Cluster.EnsureCheckpointTopic also sets the segment size and min.insync.Replicas.
func setupCheckpointTopic(cfg relay.Config) []Topic {
	if !cfg.Delivery.Exactly() || len(cfg.Kafka.Brokers) == 0 {
		return nil
	}
	spec := sink.TopicSpec{Partitions: 1, ReplicationFactor: cfg.Delivery.CheckpointReplicationFactor,
		Configs: map[string]string{"cleanup.policy": "compact"}}
	return []Topic{{Name: cfg.Delivery.CheckpointTopic, Spec: spec}}
}

// ensureTopic creates t unless it exists: exactly-once's checkpoint topic
// as run does (producer.Cluster.EnsureCheckpointTopic: compacted; an existing one that is
// not is refused), any other as sink.EnsureTopic does.
func ensureTopic(ctx context.Context, cfg relay.Config, sec sink.Security, t Topic) (bool, error) {
	if !cfg.Delivery.Exactly() || t.Name != cfg.Delivery.CheckpointTopic {
		return sink.EnsureTopic(ctx, cfg.Kafka.Brokers, sec, t.Name, t.Spec)
	}
	cluster := producer.Connect(sec, cfg.Kafka.Brokers, 0)
	defer cluster.Close()
	created, err := cluster.EnsureCheckpointTopic(ctx, t.Name, cfg.Delivery.CheckpointReplicationFactor)
	if err != nil {
		return false, fmt.Errorf("checkpoint topic %s: %w", t.Name, err)
	}
	return created, nil
}

// apiNames lists APIs with their versions, "InitProducerId v4, …".
func apiNames(keys []producer.APIKey, versions map[producer.APIKey]int) string {
	var out []string
	for _, k := range keys {
		if v, ok := versions[k]; ok {
			out = append(out, fmt.Sprintf("%s v%d", k, v))
		} else {
			out = append(out, k.String())
		}
	}
	return strings.Join(out, ", ")
}

// missingAPIs are those of keys that versions lacks.
func missingAPIs(keys []producer.APIKey, versions map[producer.APIKey]int) []producer.APIKey {
	return slices.DeleteFunc(slices.Clone(keys), func(k producer.APIKey) bool { _, ok := versions[k]; return ok })
}

// judgeAPIs: every broker answers the requests of a transactional
// producer; InitProducerId v3 (Kafka 2.5) lets it bump its epoch (KIP-360).
func judgeAPIs(f txnFacts) checklist.Item {
	const name = "transaction support"
	if f.VersionErr != nil {
		return checklist.Item{Name: name, Status: checklist.Warn, Detail: "could not read the brokers' API versions: " + checklist.OneLine(f.VersionErr),
			Fix: "exactly-once needs FindCoordinator, InitProducerId, AddPartitionsToTxn and EndTxn on every broker (Kafka 2.5 or later)"}
	}
	if missing := missingAPIs(transactionAPIs, f.Versions); len(missing) > 0 {
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: fmt.Sprintf("not every broker answers %s: no transactions on this cluster", apiNames(missing, nil)),
			Fix:    "upgrade the brokers to Kafka 2.5 or later, or use --delivery at-least-once"}
	}
	detail := fmt.Sprintf("%s on every broker (%d)", apiNames(transactionAPIs, f.Versions), f.Brokers)
	if v := f.Versions[producer.APIInitProducerID]; v < 3 {
		return checklist.Item{Name: name, Status: checklist.Warn,
			Detail: detail + fmt.Sprintf("; InitProducerId below v3 (Kafka before 2.5) cannot bump an epoch (KIP-360): "+
				"a transaction the coordinator aborts, or a lost producer id, fences the relay, which restarts from its checkpoint"),
			Fix: "upgrade the brokers to Kafka 2.5 or later"}
	}
	return checklist.Item{Name: name, Status: checklist.OK, Detail: detail}
}

// judgeStateLog: the transaction coordinators' log exists, or can be
// created, and survives one broker down. Its replication factor above the
// broker count means it is never created, so no coordinator ever starts.
func judgeStateLog(f txnFacts) checklist.Item {
	const name = "transaction state log"
	rf, minISR := f.Configs[cfgStateLogRF], f.Configs[cfgStateLogMinISR]
	var detail string
	switch {
	case f.StateLog.Exists:
		rf = f.StateLog.Replicas
		detail = fmt.Sprintf("%s exists, %d partitions, replication factor %d", transactionStateLog, f.StateLog.Partitions, rf)
	case f.ConfigErr != nil || rf == 0:
		why := "not answered"
		if f.ConfigErr != nil {
			why = checklist.OneLine(f.ConfigErr)
		}
		return checklist.Item{Name: name, Status: checklist.Warn,
			Detail: fmt.Sprintf("%s does not exist yet, and the brokers' %s could not be read: %s", transactionStateLog, cfgStateLogRF, why),
			Fix:    fmt.Sprintf("make sure %s is at most the broker count (%d), or no transaction coordinator can start; grant DESCRIBE_CONFIGS on the cluster to check it", cfgStateLogRF, f.Brokers)}
	case rf > f.Brokers:
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: fmt.Sprintf("%s=%d on %d broker(s): %s can never be created, so no transaction coordinator starts (FindCoordinator answers COORDINATOR_NOT_AVAILABLE for ever)",
				cfgStateLogRF, rf, f.Brokers, transactionStateLog),
			Fix: fmt.Sprintf("set %s=%d (and %s=%d) in every broker's server.properties and restart them, or add brokers",
				cfgStateLogRF, f.Brokers, cfgStateLogMinISR, max(1, f.Brokers-1))}
	default:
		detail = fmt.Sprintf("%s does not exist yet; the first transactional producer creates it, replication factor %d", transactionStateLog, rf)
	}
	if minISR > 0 {
		detail += fmt.Sprintf(", %s %d", cfgStateLogMinISR, minISR)
	}
	if f.Brokers > 1 && minISR > rf-1 {
		return checklist.Item{Name: name, Status: checklist.Warn,
			Detail: detail + ": with one broker down, the coordinators it replicates cannot write, and commits stop",
			Fix:    fmt.Sprintf("replication factor 3 with %s=2 (%s=3 before the log is created; kafka-reassign-partitions.sh after)", cfgStateLogMinISR, cfgStateLogRF)}
	}
	return checklist.Item{Name: name, Status: checklist.OK, Detail: detail}
}

// judgeTimeout: --transaction-timeout is at most every broker's
// transaction.max.timeout.ms, or InitProducerId is refused with
// INVALID_TRANSACTION_TIMEOUT.
func judgeTimeout(f txnFacts, timeout time.Duration) checklist.Item {
	const name = "transaction timeout"
	maxMs, known := f.Configs[cfgTxnMaxTimeoutMs]
	if !known {
		return checklist.Item{Name: name, Status: checklist.Warn,
			Detail: fmt.Sprintf("the brokers' %s could not be read; --transaction-timeout %s must not exceed it (15m by default)", cfgTxnMaxTimeoutMs, timeout),
			Fix:    "grant DESCRIBE_CONFIGS on the cluster to check it"}
	}
	limit := time.Duration(maxMs) * time.Millisecond
	if timeout > limit {
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: fmt.Sprintf("--transaction-timeout %s exceeds the brokers' %s %d (%s): InitProducerId is refused with INVALID_TRANSACTION_TIMEOUT",
				timeout, cfgTxnMaxTimeoutMs, maxMs, limit),
			Fix: fmt.Sprintf("--transaction-timeout %s or less, or raise %s on every broker", limit, cfgTxnMaxTimeoutMs)}
	}
	return checklist.Item{Name: name, Status: checklist.OK,
		Detail: fmt.Sprintf("--transaction-timeout %s, within the brokers' %s %d (%s)", timeout, cfgTxnMaxTimeoutMs, maxMs, limit)}
}

// judgeCheckpointTopic: the checkpoint topic is compacted (run refuses one
// that is not), or will be created by run or setup.
func judgeCheckpointTopic(f txnFacts, topic string, rf int) checklist.Item {
	const name = "checkpoint topic"
	c := f.Checkpoint
	switch {
	case c.Exists && c.PolicyErr != nil:
		return checklist.Item{Name: name, Status: checklist.Warn, Detail: fmt.Sprintf("%s exists; could not read: %s", topic, checklist.OneLine(c.PolicyErr)),
			Fix: "grant DESCRIBE_CONFIGS on it: run refuses it unless cleanup.policy=compact"}
	case c.Exists && c.Policy != "compact":
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: fmt.Sprintf("%s has cleanup.policy=%s: retention may delete a slot's last checkpoint, and run refuses it", topic, c.Policy),
			Fix: fmt.Sprintf("kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact",
				f.bootstrap, topic)}
	case c.Exists:
		return checklist.Item{Name: name, Status: checklist.OK,
			Detail: fmt.Sprintf("%s exists, compacted, %d partition(s), replication factor %d", topic, c.Partitions, c.Replicas)}
	case rf > f.Brokers:
		return checklist.Item{Name: name, Status: checklist.Fail,
			Detail: fmt.Sprintf("%s does not exist, and cannot be created with --checkpoint-replication-factor %d on %d broker(s)", topic, rf, f.Brokers),
			Fix:    fmt.Sprintf("--checkpoint-replication-factor %d or less", f.Brokers)}
	}
	replication := "the broker's default replication factor"
	if rf > 0 {
		replication = fmt.Sprintf("replication factor %d", rf)
	}
	return checklist.Item{Name: name, Status: checklist.OK,
		Detail: fmt.Sprintf("%s does not exist yet; run (or setup) creates it: 1 partition, compacted, %s", topic, replication)}
}

// judgeACLs: the relay's principal may use the transactional id. check
// lists the ACLs rather than take the id, which would fence the instance
// running with it; a principal with no ACL may still be a super user, so a
// missing grant is a warning.
func judgeACLs(f txnFacts, id, principal, ckptTopic string) checklist.Item {
	const name = "transactional id ACLs"
	idem := ", and IDEMPOTENT_WRITE on the cluster before Kafka 3.0"
	if _, v3 := f.Versions[apiListTransactions]; v3 {
		idem = "; no IDEMPOTENT_WRITE on the cluster (Kafka 3.0 or later)"
	} else if f.VersionErr == nil {
		idem = ", and IDEMPOTENT_WRITE on the cluster (these brokers are older than Kafka 3.0)"
	}
	who := principal
	if who == "" {
		who = "the relay's principal"
	}
	needs := fmt.Sprintf("%s needs WRITE and DESCRIBE on TransactionalId %s, READ and WRITE on topic %s (CREATE too until it exists)%s",
		who, id, ckptTopic, idem)
	grant := fmt.Sprintf("kafka-acls.sh --bootstrap-server %s --add --allow-principal %s --operation Write --operation Describe --transactional-id %s",
		f.bootstrap, cmp.Or(principal, "User:<relay>"), id)
	switch {
	case errors.Is(f.aclErr, producer.ErrNoAuthorizer):
		return checklist.Item{Name: name, Status: checklist.OK, Detail: fmt.Sprintf("the cluster has no authorizer: any client may use transactional id %s", id)}
	case f.aclErr != nil:
		return checklist.Item{Name: name, Status: checklist.Warn,
			Detail: fmt.Sprintf("cannot verify (DescribeAcls: %s); %s", checklist.OneLine(f.aclErr), needs), Fix: grant}
	}
	applies := func(a producer.ACL) bool {
		return principal == "" || a.Principal == principal || a.Principal == "User:*"
	}
	var writers []string
	for _, a := range f.acls {
		switch {
		case !applies(a):
		case !a.Allow && slices.Contains([]producer.ACLOperation{producer.ACLOperationWrite, producer.ACLOperationDescribe, producer.ACLOperationAll}, a.Operation):
			return checklist.Item{Name: name, Status: checklist.Fail,
				Detail: fmt.Sprintf("an ACL denies %s %s on TransactionalId %s; %s", a.Principal, a.Operation, id, needs), Fix: "remove the DENY ACL (kafka-acls.sh --remove)"}
		case a.Allow && (a.Operation == producer.ACLOperationWrite || a.Operation == producer.ACLOperationAll) && !slices.Contains(writers, a.Principal):
			writers = append(writers, a.Principal)
		}
	}
	switch {
	case len(writers) == 0:
		return checklist.Item{Name: name, Status: checklist.Warn,
			Detail: fmt.Sprintf("no ACL lets %s write TransactionalId %s (a super user needs none); %s", who, id, needs), Fix: grant}
	case principal == "":
		return checklist.Item{Name: name, Status: checklist.OK,
			Detail: fmt.Sprintf("ACLs let %s write TransactionalId %s (WRITE implies DESCRIBE); the relay's principal must be among them", strings.Join(writers, ", "), id)}
	}
	return checklist.Item{Name: name, Status: checklist.OK,
		Detail: fmt.Sprintf("%s may write TransactionalId %s (WRITE implies DESCRIBE); it also needs READ and WRITE on topic %s%s", principal, id, ckptTopic, idem)}
}

// systemID is the Postgres cluster's system identifier, which the default
// transactional id names; empty when it cannot be read (pg_control_system
// needs pg_monitor or superuser on some versions), and the check then shows
// the id's pattern.
func systemID(ctx context.Context, url string) string {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return ""
	}
	defer conn.Close(context.Background())
	var id string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&id); err != nil {
		return ""
	}
	return id
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
