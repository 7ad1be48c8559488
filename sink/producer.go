package sink

import (
	"context"
	"crypto/tls"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// How the brokers are reached, the record batches' codecs and how a
// missing topic is created are the producer's (producer/connect.go,
// compress.go, provision.go); these names stay so that the writer's
// callers configure it through sink alone.
type (
	// Security is how the writer reaches the brokers (producer.Security).
	Security = producer.Security
	// TLSFiles names what a TLS connection to the brokers needs.
	TLSFiles = producer.TLSFiles
	// SASLMechanism names a SASL mechanism (producer.SASLMechanism).
	SASLMechanism = producer.SASLMechanism
	// SASL is a mechanism and its credentials (producer.SASL).
	SASL = producer.SASL
	// Compression names a record batch codec (producer.Compression).
	Compression = producer.Compression
	// TopicSpec is how a missing topic is created (producer.TopicSpec).
	TopicSpec = producer.TopicSpec
	// Transaction is the transactional producer a writer's batches belong
	// to, for exactly-once delivery (producer.Transaction).
	Transaction = producer.Transaction
)

// ReasonTopicNotCreated is a topic the broker refused to create.
const ReasonTopicNotCreated = producer.ReasonTopicNotCreated

// Compressions.
const (
	CompressionNone   = producer.CompressionNone
	CompressionGzip   = producer.CompressionGzip
	CompressionSnappy = producer.CompressionSnappy
	CompressionLz4    = producer.CompressionLz4
	CompressionZstd   = producer.CompressionZstd
)

// NewTLSConfig reads the files f names into a TLS client configuration.
func NewTLSConfig(f TLSFiles) (*tls.Config, error) { return producer.NewTLSConfig(f) }

// Ping asks the brokers for cluster metadata (producer.Ping).
func Ping(ctx context.Context, brokers []string, sec Security) error {
	return producer.Ping(ctx, brokers, sec)
}

// EnsureTopic creates topic as spec says unless it exists, and reports
// whether it created it (producer.EnsureTopic).
func EnsureTopic(ctx context.Context, brokers []string, sec Security, topic string, spec TopicSpec) (bool, error) {
	return producer.EnsureTopic(ctx, brokers, sec, topic, spec)
}
