// Package dlq reads the dead-letter topic and replays dead letters: `outbox-cdc
// dlq list` shows what is there, `outbox-cdc dlq replay` publishes the chosen
// ones again to the topic they were meant for, once their cause is fixed.
// Both return data (entries, a replay report) that cmd/outbox-cdc renders as
// text or JSON. The dead-letter topic is only read, never consumed as a
// group or trimmed: a dead letter stays there after its replay. Reads and
// replays go through the producer room (producer.Cluster's ReadTopic and
// Publisher); what a dead letter's headers mean is decided here (Entry).
//
// A dead letter is published again as its event would have been: an
// event that had a null key (--null-key=allow, or a table without a key
// column) was dead-lettered keyed by its id, with the outbox_cdc.null_key
// header, and is replayed with a null key (one dead-lettered before that
// header existed is replayed keyed by its id). One whose row named its
// partition (--column-partition, the outbox_cdc.partition header) goes to
// that partition, else to its key's; a partition its topic does not have
// fails it, and it is never sent to another.
package dlq
