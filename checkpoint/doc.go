// Package checkpoint keeps the one invariant outbox-cdc exists for: the
// position confirmed to Postgres never passes an event Kafka has not
// acknowledged. The decoder tracks events and transaction ends in stream
// order; the sink acknowledges events in any order; Confirmed reports the end
// of the newest transaction whose events, and all before them, are acked.
// Tracking also bounds the work in flight, by count and by bytes, so that
// reading the WAL pauses instead of memory growing.
package checkpoint
