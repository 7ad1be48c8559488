// Package checkpoint keeps the one invariant outbox-cdc exists for: the
// position confirmed to Postgres never passes an event Kafka has not
// acknowledged. The decoder tracks events and transaction ends in stream
// order; the sink acknowledges events in any order; Confirmed reports the end
// of the newest transaction whose events, and all before them, are acked.
// Tracking also bounds the work in flight, by count and by bytes, so that
// reading the WAL pauses instead of memory growing.
//
// For exactly-once delivery it also defines the checkpoint record a Kafka
// transaction carries in a compacted topic, and its codec (Record, Encode,
// Decode, Key), and decides with the slot where a restart begins (Resume).
// It does no I/O: the producer room writes the record into the topic and
// reads the last committed one back (producer.Cluster).
package checkpoint
