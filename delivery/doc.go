// Package delivery is the seam between the relay's pipeline and Kafka: a
// delivery mode says what a session confirms, how its writer writes and
// what its end does, and the pipeline calls it without asking which mode it
// is. At-least-once confirms what the checkpoint tracker confirms;
// exactly-once (its gate, committer, transaction clock and checkpoint
// records, for the stream and for the backfill) publishes whole Postgres
// transactions in Kafka transactions and confirms what a commit holds.
//
// A new mode is a file here and its Name in modes; relay wires New once.
package delivery
