// Package sink owns Kafka: the kafka-go writer's configuration (acks=all,
// Java-compatible murmur2 key partitioning, millisecond batching), topic
// routing from each event, the headers every message carries, and the
// classification of produce errors into retriable and permanent. It reports
// each event's fate to a callback and decides nothing else.
package sink
