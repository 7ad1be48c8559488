// Package producer is the Kafka producer core under sink/: it encodes
// record batches (magic 2) itself, so that a batch carries the producer id,
// epoch and base sequence an idempotent (and later transactional) producer
// needs. kafka-go's own encoder always writes producer id −1; kafka-go
// still carries the bytes (protocol/rawproduce) and compresses them (its
// compress codecs, so that sink's 64 KiB lz4 blocks apply here too).
package producer
