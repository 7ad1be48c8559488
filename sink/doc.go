// Package sink owns Kafka: a producer built on kafka-go's protocol package
// and the producer core (acks=all, idempotent or transactional,
// Java-compatible murmur2 key partitioning, one sender and one connection
// per broker, each request carrying a batch of every partition with
// messages waiting, paced so that a trickle of events becomes few
// requests, up to MaxInFlightRequests out at once for a backlog; see
// sender), topic routing from each event, the headers every message carries,
// dead letters for what Kafka can never accept, and the classification of
// produce errors into retriable and permanent. It reports each event's fate
// to a callback and decides nothing else.
//
// The Writer composes rooms of its own: shape turns an event into its
// record (envelope.go), routes decides its partition and holds each
// topic's partition count (routes.go), health tells an outage from a
// blip (failing.go), and the senders with their partitions' queues and
// sequences send (broker.go, partition.go, idempotence.go), in Kafka
// transactions for exactly-once (transaction.go).
//
// Each lock is locked only in the file that declares it: a partition's
// (partition.go) guards all of its state, a sender's (broker.go) its list
// of partitions and requests out, the index's (index.go) the senders and
// brokers, the routes' (routes.go) the topics' counts and drains, the
// producer identity's (idempotence.go) its id. Two nestings only: a
// partition's lock, then the index's or a sender's (see partition); and
// the producer identity's renew, then its mu: renewSession holds renew,
// one InitProducerID at a time, across the request (up to 10 s, on the
// receive goroutine of the sender whose batch was refused, whose later
// answers wait meanwhile) and reads and records the id under mu.
package sink
