// Package sink turns an event into a record and decides its fate: topic
// routing and admission (Topic, Reserved, TopicLimit), envelopes (one file
// per format behind shape: envelope*.go), the headers every record
// carries, dead letters for what Kafka can never accept (deadletter.go),
// and contract and registry framing. It reports each event's fate to a
// callback and decides nothing else.
//
// The Writer composes: shape turns an event into its record, letters
// builds its dead letter, and the produce engine (producer.Writer) sends
// it, asynchronously, in order within a partition. The engine knows no
// envelope: a record the brokers refuse for what it is (too large for its
// topic, an invalid record) comes back to sink's refusals
// (producer.DeadLetters), which build its dead letter. Sink starts no
// goroutine and holds no Kafka client; its only lock is the TopicLimit's,
// one cap shared by every writer of a relay.
package sink
