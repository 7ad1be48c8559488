package relay

import (
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Delivery is what a consumer of the topics may rely on (--delivery and
// the settings of exactly-once).
type Delivery struct {
	// Mode is at-least-once (the default) or exactly-once.
	Mode DeliveryMode
	// TransactionalID names the Kafka producer of exactly-once across
	// restarts (--transactional-id). Every instance of one slot must share
	// it: the instance that takes the slot fences the one before it. Empty:
	// outbox-cdc.<database>.<slot>.
	TransactionalID string
	// CheckpointTopic is the compacted topic each Kafka transaction also
	// writes the last Postgres transaction it holds to (--checkpoint-topic);
	// the relay creates it. Default outbox_cdc.checkpoints.
	CheckpointTopic string
	// CheckpointReplicationFactor is the checkpoint topic's replication
	// factor when the relay creates it; 0: the broker's default.
	CheckpointReplicationFactor int
	// TransactionInterval is how long a Kafka transaction gathers whole
	// Postgres transactions before it commits (--transaction-interval); a
	// Postgres transaction longer than that keeps it open until its commit.
	// Default 100ms.
	TransactionInterval time.Duration
	// TransactionTimeout is the coordinator's transaction.timeout.ms
	// (--transaction-timeout): a Kafka transaction open longer is aborted
	// by the broker, which fences the relay's producer. At most the
	// broker's transaction.max.timeout.ms (15 min by default). Default 1m.
	TransactionTimeout time.Duration
}

// DeliveryMode is --delivery.
type DeliveryMode string

// Values of DeliveryMode.
const (
	// AtLeastOnce publishes every event once or, after a crash, more: an
	// idempotent producer writes a retried batch once, but what was
	// published and not yet confirmed to Postgres is published again.
	AtLeastOnce DeliveryMode = "at-least-once"
	// ExactlyOnce publishes whole Postgres transactions in Kafka
	// transactions with a checkpoint of the last one: a read_committed
	// consumer sees each event once, across crashes and takeovers.
	ExactlyOnce DeliveryMode = "exactly-once"
)

// DefaultCheckpointTopic is Delivery.CheckpointTopic's default.
const DefaultCheckpointTopic = "outbox_cdc.checkpoints"

func defaultDelivery() Delivery {
	return Delivery{Mode: AtLeastOnce, CheckpointTopic: DefaultCheckpointTopic,
		TransactionInterval: 100 * time.Millisecond, TransactionTimeout: time.Minute}
}

// Exactly reports whether d is exactly-once.
func (d Delivery) Exactly() bool { return d.Mode == ExactlyOnce }

// transactionalID is d's TransactionalID, or its default for the database
// of postgresURL and slot.
func (d Delivery) transactionalID(postgresURL, slot string) string {
	if d.TransactionalID != "" {
		return d.TransactionalID
	}
	db := "postgres"
	if pc, err := pgconn.ParseConfig(postgresURL); err == nil && pc.Database != "" {
		db = pc.Database
	}
	return "outbox-cdc." + db + "." + slot
}

// TransactionalID is the transactional id exactly-once takes with c:
// --transactional-id, or its default. `check` looks up its ACLs.
func (c Config) TransactionalID() string {
	return c.Delivery.transactionalID(c.PostgresURL, c.Slot.Name)
}

// kafkaName is what Kafka accepts as a topic name.
var kafkaName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func (d Delivery) validate() error {
	switch d.Mode {
	case AtLeastOnce:
		return nil
	case ExactlyOnce:
	default:
		return bad("delivery", "--delivery %q: use at-least-once or exactly-once", d.Mode)
	}
	if !kafkaName.MatchString(d.CheckpointTopic) || d.CheckpointTopic == "." || d.CheckpointTopic == ".." {
		return bad("checkpoint-topic", "--checkpoint-topic %q is not a Kafka topic name (letters, digits, . _ -, at most 249)", d.CheckpointTopic)
	}
	if d.CheckpointReplicationFactor < 0 || d.CheckpointReplicationFactor > 32767 {
		return bad("checkpoint-replication-factor", "--checkpoint-replication-factor %d: use 0 (the broker's default) or a positive count", d.CheckpointReplicationFactor)
	}
	if len(d.TransactionalID) > 32767 {
		return bad("transactional-id", "--transactional-id is longer than Kafka accepts")
	}
	if d.TransactionTimeout < time.Second || d.TransactionTimeout.Milliseconds() > 1<<31-1 {
		return bad("transaction-timeout", "--transaction-timeout %s: use at least 1s and at most the broker's transaction.max.timeout.ms (15m by default)", d.TransactionTimeout)
	}
	if d.TransactionInterval <= 0 || d.TransactionInterval > d.TransactionTimeout/4 {
		return bad("transaction-interval", "--transaction-interval %s: use more than 0 and at most a quarter of --transaction-timeout (%s)",
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
