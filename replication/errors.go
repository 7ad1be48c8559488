package replication

var (
	// ErrSlotActive is a slot streamed by another process, typically a
	// second outbox-cdc standing by: it waits and tries again.
	ErrSlotActive = transient("replication slot in use by another process")
	// ErrNoResponse is a replication connection on which the server stopped
	// answering: presumed dead, it is dropped and a new session begins.
	ErrNoResponse = transient("no response from postgres")
)

// transientError is a sentinel that a later session may not meet: it tells
// the relay's retry loop, which asks errors whether they are Retriable, to
// try again. Each sentinel is its own pointer, so errors.Is matches it and
// nothing else.
type transientError struct{ msg string }

func transient(msg string) error { return &transientError{msg} }

func (e *transientError) Error() string { return e.msg }

// Retriable is true: the other process lets go of the slot, the server
// answers again.
func (e *transientError) Retriable() bool { return true }
