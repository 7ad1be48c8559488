// Package cleanup keeps outbox tables small with --cleanup=delete-after-publish:
// it deletes each row once Kafka has acknowledged its event, and only then
// acks the event to the checkpoint. A row's position is therefore confirmed
// only after the row is gone, so a crash between the broker's ack and the
// delete replays the event (a duplicate, as at-least-once allows) and
// deletes the row then; no row is ever deleted before its event is in
// Kafka. Rows that were dead-lettered are kept, for people to look at.
package cleanup
