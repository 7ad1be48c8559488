// Package sink owns Kafka: a producer built on kafka-go's protocol package
// (acks=all, Java-compatible murmur2 key partitioning, one sender and one
// produce request in flight per broker, each request carrying a batch of
// every partition with messages waiting, paced so that a trickle of events
// becomes few requests; see sender), topic routing from each event, the headers every message carries,
// dead letters for what Kafka can never accept, and the classification of
// produce errors into retriable and permanent. It reports each event's fate
// to a callback and decides nothing else.
package sink
