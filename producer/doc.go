// Package producer is the Kafka producer core under sink/: it encodes
// record batches (magic 2) itself, so that a batch carries the producer id,
// epoch and base sequence an idempotent or transactional producer needs.
// kafka-go's own encoder always writes producer id −1; kafka-go still
// carries the bytes (protocol/rawproduce) and compresses them (its
// compress codecs, so that sink's 64 KiB lz4 blocks apply here too).
//
// Txn is the transactional half, for exactly-once delivery (sink's writer
// sends its batches in the open transaction; relay commits it): it finds
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
