package sink

import "github.com/outbox-cdc/outbox-cdc/producer"

// Reasons an event cannot be published, carried in dead-letter headers.
// Kafka's own refusals are the producer's (producer/refusal.go); the
// others are the fates sink decides.
const (
	ReasonInvalidTopic    = producer.ReasonInvalidTopic    // the routed topic name breaks Kafka's rules
	ReasonMessageTooLarge = producer.ReasonMessageTooLarge // over --max-message-bytes, or refused by the broker as too large
	ReasonTopicMissing    = producer.ReasonTopicMissing    // the topic does not exist and is not created
	ReasonInvalidRecord   = producer.ReasonInvalidRecord   // the broker refused the record itself
	ReasonTopicNotAllowed = "topic_not_allowed"            // the routed topic does not match --topic-allow
	ReasonTopicLimit      = "topic_limit"                  // a new topic while --max-topics are in use
	// The row's partition column (--column-partition) names a partition
	// the topic does not have: negative, or at or past its count.
	ReasonPartitionOutOfRange = producer.ReasonPartitionOutOfRange
	// The row's partition column's text is not an integer.
	ReasonInvalidPartition = producer.ReasonInvalidPartition
	// The payload does not meet its event type's contract (--contracts);
	// HeaderContractError says where.
	ReasonContractViolation = "contract_violation"
	// The event type has no contract, and --contracts-unknown=dead-letter.
	ReasonContractMissing = "contract_missing"
	// Checking the payload against its contract would take more steps
	// than its budget (a contract whose anyOf or oneOf recurses can take
	// time exponential in the payload's nesting): it was not validated.
	ReasonContractBudget = "contract_budget_exceeded"
	// The schema registry (--schema-registry) refused the event type's
	// contract under the topic's subject: incompatible with its latest
	// version, or invalid; HeaderRegistryError holds its answer.
	ReasonSchemaRegistryRefused = "schema_registry_refused"
)

// Error is a failed publish, classified once at the producer's edge
// (producer.Error), so that callers branch on Transient and Reason rather
// than on broker error codes or strings.
type Error = producer.Error
