// Package producer is the Kafka side of the relay, and its only Kafka
// client. Writer is the produce engine under sink/ (acks=all, idempotent
// or transactional, Java-compatible murmur2 key partitioning): one sender
// and one connection per broker (sender.go, sender_conn.go), each request
// carrying a batch of every partition with records waiting, paced so that
// a trickle becomes few requests, up to MaxInFlightRequests out at once
// for a backlog; each partition's queue, retries, sequence and report
// order under the partition's own lock (partition.go, partition_state.go,
// reports.go); one produce path (a refused batch's records go one by one
// through the partition's own retries: salvage, health.go); routes
// (routes.go: partition counts and their changes, metadata.go,
// recheck.go), the producer id (idempotence.go) and the transaction a
// transactional writer's batches belong to (transaction.go). It takes
// Outgoing records with a token and reports each one's fate to Done; what
// a record means, and its dead letter, are its caller's (DeadLetters).
//
// Each lock is locked only in the file that declares it: a partition's
// (partition.go) guards all of its state, a sender's (sender.go) its list
// of partitions and requests out, the index's (index.go) the senders and
// brokers, the routes' (routes.go) the topics' counts and drains, the
// producer identity's (idempotence.go) its id. Two nestings only: a
// partition's lock, then the index's or a sender's (see partition); and
// the producer identity's renew, then its mu: renewSession holds renew,
// one InitProducerID at a time, across the request (up to 10 s, on the
// receive goroutine of the sender whose batch was refused, whose later
// answers wait meanwhile) and reads and records the id under mu.
//
// The engine encodes record batches (magic 2) itself, so that a batch
// carries the producer id, epoch and base sequence an idempotent or
// transactional producer needs.
// kafka-go's own encoder always writes producer id −1; kafka-go still
// carries the bytes (protocol/rawproduce) and compresses them (its
// compress codecs, so that sink's 64 KiB lz4 blocks apply here too).
//
// Txn is the transactional half, for exactly-once delivery (the Writer
// sends its batches in the open transaction, through Transaction; relay
// commits it): it finds
// the transaction coordinator of a transactional id, fences the id's
// previous holder (InitProducerID), adds partitions to a transaction once
// each, and commits or aborts it (EndTxn), with the Java producer's
// retriable, abortable and fatal errors (TxnError). The caller encodes the
// batches (Header), sends them and reports a refused one (Refused).
//
// Cluster is exactly-once's connection to the brokers outside a writer,
// so that relay and admin hold no Kafka client: it makes Txns, creates
// and checks the checkpoint topic (EnsureCheckpointTopic), writes a
// slot's checkpoint records in the open transaction (CheckpointWriter),
// reads the last committed one back (ReadCheckpoint, which decodes the
// fetch answer itself, bounded, dropping aborted transactions), and reads
// what check judges (ReadTxnSupport, TransactionalIDACLs). The record's
// codec is checkpoint's.
//
// A Cluster also reads any topic for a command (Partitions, Offsets, and
// ReadTopic, which shares the checkpoint reads' bounded fetch and decoding)
// and publishes messages outside a transaction (Publisher): `outbox-cdc
// dlq` lists and replays dead letters through them, and holds no Kafka
// client of its own. What a message's headers mean is its caller's.
package producer
