// Package contract holds the payload contracts of event types: a directory
// of JSON Schema documents (draft 2020-12 unless a schema says otherwise),
// compiled once at start. sink asks a Set, through a one-method seam, whether
// each payload meets its event type's contract before it is published, so
// that a malformed event is dead-lettered instead of reaching consumers. It
// reads local files only: a $ref that would need the network is refused.
package contract
