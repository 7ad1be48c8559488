// Package decode turns pgoutput messages into outbox events: INSERTs into
// the outbox tables, and logical decoding messages with the events' prefix
// (their content in package message's encoding). It keeps the
// relation cache that Relation messages refresh, maps the outbox table's
// columns to event fields once per relation, and reads Insert tuples. It does
// no I/O: every function works on the bytes of one XLogData payload.
package decode
