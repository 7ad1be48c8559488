// Package relay is outbox-cdc's heart, importable: it wires one replication
// slot to one Kafka producer and keeps the promise that the slot is never
// confirmed past an event Kafka has not acknowledged.
//
// An event walks top-down through the packages:
//
//	slot         readies the publication and the slot (before streaming)
//	backfill     reads the rows committed before the slot, and feeds them to relay's entry
//	replication  receives pgoutput messages from the slot
//	relay        hands each to decode, tracks it in checkpoint, publishes it through sink
//	decode       turns an INSERT into an outbox table, or a logical decoding message, into an event
//	checkpoint   orders acknowledgements and says which position may be confirmed
//	sink         produces to Kafka (acks=all) and reports each event's fate
//	delivery     the mode: what is confirmed, and (exactly-once) Kafka transactions with a checkpoint
//	cleanup      deletes published rows before their position is confirmed (--cleanup)
//
// Run retries what a new session may mend (a lost connection, a broker away
// too long) from the slot's confirmed position, stands by while another
// process holds the slot, and on ctx's end drains what is in flight and
// confirms what was acknowledged. Ready says whether it streams, for a
// health endpoint.
//
// Its Config is composed of each component's settings (Kafka, Slot,
// Tables, Stream, Producer, Topics, Cleanup), typed and validated once by
// New (Validate, a *ConfigError naming the field to fix). cmd/outbox-cdc is
// a thin shell around it: package config fills a Config from flags,
// OUTBOX_CDC_* variables and a config file; cmd adds signals, the HTTP
// server for metrics and probes, the check, setup and status commands, and
// exit codes. A Go service can embed the relay instead, with its own logger
// and Prometheus registry:
//
//	cfg := relay.Default() // every default, and the table public.outbox
//	cfg.PostgresURL, cfg.Kafka.Brokers = url, []string{"kafka:9092"}
//	cfg.Tables = []relay.Table{cfg.Table("billing.outbox")} // each with cfg.Defaults' settings
//	r, err := relay.New(cfg, relay.WithLogger(log), relay.WithRegisterer(prometheus.DefaultRegisterer))
//	...
//	go func() { errc <- r.Run(ctx) }() // returns nil after ctx ends and the drain
package relay
