package relay

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/outbox-cdc/outbox-cdc/delivery"
)

// Delivery is what a consumer of the topics may rely on (--delivery and
// the settings of exactly-once).
type Delivery struct {
	// Mode is at-least-once (the default) or exactly-once.
	Mode DeliveryMode
	// TransactionalID names the Kafka producer of exactly-once across
	// restarts (--transactional-id). Every instance of one slot must share
	// it: the instance that takes the slot fences the one before it. Empty:
	// outbox-cdc.<system identifier>.<slot> (Config.TransactionalID).
	TransactionalID string
	// CheckpointTopic is the compacted topic each Kafka transaction also
	// writes the last Postgres transaction it holds to (--checkpoint-topic);
	// the relay creates it. Default outbox_cdc.checkpoints.
	CheckpointTopic string
	// CheckpointReplicationFactor is the checkpoint topic's replication
	// factor when the relay creates it; 0: the broker's default.
	CheckpointReplicationFactor int
	// TransactionInterval is how often Kafka commits start while events
	// keep coming; a Kafka transaction gathers whole Postgres transactions
	// meanwhile (--transaction-interval). One that begins after a quiet
	// spell commits as soon as it ends. A Postgres transaction longer than
	// that keeps it open until its commit.
	// Default 25ms (measured, see the flag's help).
	TransactionInterval time.Duration
	// TransactionTimeout is the coordinator's transaction.timeout.ms
	// (--transaction-timeout): a Kafka transaction open longer is aborted
	// by the broker, which fences the relay's producer. At most the
	// broker's transaction.max.timeout.ms (15 min by default). Default 1m.
	TransactionTimeout time.Duration
}

// DeliveryMode is --delivery: a delivery.Name.
type DeliveryMode = delivery.Name

// Values of DeliveryMode.
const (
	AtLeastOnce = delivery.AtLeastOnce
	ExactlyOnce = delivery.ExactlyOnce
)

// DefaultCheckpointTopic is Delivery.CheckpointTopic's default.
const DefaultCheckpointTopic = "outbox_cdc.checkpoints"

func defaultDelivery() Delivery {
	return Delivery{Mode: AtLeastOnce, CheckpointTopic: DefaultCheckpointTopic,
		TransactionInterval: 25 * time.Millisecond, TransactionTimeout: time.Minute}
}

// Exactly reports whether d is exactly-once.
func (d Delivery) Exactly() bool { return d.Mode == ExactlyOnce }

// TransactionalID is the transactional id exactly-once takes with c on the
// Postgres cluster of systemID (its system identifier, which a physical
// standby shares, so that a failover keeps the id): --transactional-id,
// or outbox-cdc.<system identifier>.<slot>. A slot name is unique within
// one cluster only; the system identifier keeps two clusters (staging and
// production, two shards) that share a Kafka cluster and a slot name from
// fencing each other. `check` looks up its ACLs; an empty systemID gives
// the pattern.
func (c Config) TransactionalID(systemID string) string {
	if c.Delivery.TransactionalID != "" {
		return c.Delivery.TransactionalID
	}
	if systemID == "" {
		systemID = "<system identifier>"
	}
	return "outbox-cdc." + systemID + "." + c.Slot.Name
}

// kafkaName is what Kafka accepts as a topic name.
var kafkaName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func (d Delivery) validate() error {
	if !delivery.Known(d.Mode) {
		return bad("Mode", "{Mode} %q: use %s", d.Mode, modeNames())
	}
	if !d.Exactly() {
		return nil
	}
	if !kafkaName.MatchString(d.CheckpointTopic) || d.CheckpointTopic == "." || d.CheckpointTopic == ".." {
		return bad("CheckpointTopic", "{CheckpointTopic} %q is not a Kafka topic name (letters, digits, . _ -, at most 249)", d.CheckpointTopic)
	}
	if d.CheckpointReplicationFactor < 0 || d.CheckpointReplicationFactor > 32767 {
		return bad("CheckpointReplicationFactor", "{CheckpointReplicationFactor} %d: use 0 (the broker's default) or a positive count", d.CheckpointReplicationFactor)
	}
	if len(d.TransactionalID) > 32767 {
		return bad("TransactionalID", "{TransactionalID} is longer than Kafka accepts")
	}
	if d.TransactionTimeout < time.Second || d.TransactionTimeout.Milliseconds() > 1<<31-1 {
		return bad("TransactionTimeout", "{TransactionTimeout} %s: use at least 1s and at most the broker's transaction.max.timeout.ms (15m by default)", d.TransactionTimeout)
	}
	if d.TransactionInterval <= 0 || d.TransactionInterval > d.TransactionTimeout/4 {
		return bad("TransactionInterval", "{TransactionInterval} %s: use more than 0 and at most a quarter of {TransactionTimeout} (%s)",
			d.TransactionInterval, d.TransactionTimeout)
	}
	return nil
}

// String is the mode, for logs.
func (d Delivery) String() string {
	if !d.Exactly() {
		return string(d.Mode)
	}
	return fmt.Sprintf("%s (checkpoints in %s, transactions every %s)", d.Mode, d.CheckpointTopic, d.TransactionInterval)
}

// validateCheckpointTopic refuses a checkpoint topic that events would be
// written to as well: the dead-letter topic, or a topic template without
// placeholders. Its partition's sequence would then be written by two
// owners under one producer id, and the compacted topic would drop events.
func (c Config) validateCheckpointTopic() error {
	if !c.Delivery.Exactly() {
		return nil
	}
	name := c.Delivery.CheckpointTopic
	if c.Topics.OnInvalid == OnInvalidDLQ && name == c.Topics.DeadLetterTopic {
		return bad("Delivery.CheckpointTopic", "{Delivery.CheckpointTopic} %s is also {Topics.DeadLetterTopic}: give the checkpoints a topic of their own", name)
	}
	for _, t := range append([]Table{c.Defaults}, c.Tables...) {
		if t.Route.Topic == name {
			return bad("Delivery.CheckpointTopic", "{Delivery.CheckpointTopic} %s is also {Defaults.Route.Topic}: give the checkpoints a topic of their own", name)
		}
	}
	return nil
}

// modeNames lists the delivery modes, for an error: "a, b or c".
func modeNames() string {
	names := delivery.Names()
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
