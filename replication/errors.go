package replication

import "errors"

var (
	// ErrSlotActive is a slot streamed by another process, typically a
	// second outbox-cdc standing by: it waits and tries again.
	ErrSlotActive = errors.New("replication slot in use by another process")
	// ErrNoResponse is a replication connection on which the server stopped
	// answering: presumed dead, it is dropped and a new session begins.
	ErrNoResponse = errors.New("no response from postgres")
)
