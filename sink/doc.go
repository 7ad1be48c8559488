// Package sink owns Kafka: a producer built on kafka-go's client (acks=all,
// Java-compatible murmur2 key partitioning, one goroutine and one produce
// request in flight per partition, batches that grow while a request is
// out), topic routing from each event, the headers every message carries,
// dead letters for what Kafka can never accept, and the classification of
// produce errors into retriable and permanent. It reports each event's fate
// to a callback and decides nothing else.
package sink
