// Package cleanup keeps outbox tables small, or tells their status columns
// what happened: with --cleanup=delete-after-publish it deletes each row
// once Kafka has acknowledged its event; with --cleanup=mark it updates the
// row instead (--mark COLUMN=VALUE, and --mark-dead for rows that went to
// the dead-letter topic). Only then does it ack the event to the
// checkpoint. A row's position is therefore confirmed only after the row is
// gone or marked, so a crash between the broker's ack and the statement
// replays the event (a duplicate, as at-least-once allows) and cleans the
// row then; no row is ever cleaned before its event is in Kafka. Statements
// are batched by id; identifiers are quoted and values bound as parameters.
//
// With exactly-once delivery a row is cleaned only after the Kafka
// transaction holding its event commits (Hold, Release).
package cleanup
