package slot

import "errors"

var (
	// ErrNotReady is a server, role, table, publication or slot that is not
	// in the shape outbox-cdc needs; the message says what to change.
	ErrNotReady = permanent("postgres not ready for outbox-cdc")
	// ErrColumnMissing is a configured column the outbox table lacks: a
	// --column-* flag to fix.
	ErrColumnMissing = permanent("outbox column missing")
	// ErrSlotInvalidated is a slot whose WAL was removed: streaming from it
	// would skip events, so outbox-cdc refuses and says how to recover.
	ErrSlotInvalidated = permanent("replication slot invalidated")
	// ErrNoSlot is a slot that does not exist (see ReadSlotState).
	ErrNoSlot = errors.New("replication slot does not exist")
	// ErrLostSlotHeld is a lost slot that a heal would drop and a process
	// still holds (its walsender not yet ended): the relay waits for it as
	// for a slot another instance streams.
	ErrLostSlotHeld = transient("lost replication slot still held by a process")
)

// permanentError is a sentinel that a person must act on (a grant, a flag,
// a recreated slot): it tells the relay's retry loop, which asks errors
// whether they are Retriable, that a new session cannot mend it. Each
// sentinel is its own pointer, so errors.Is matches it and nothing else.
type permanentError struct{ msg string }

func permanent(msg string) error { return &permanentError{msg} }

func (e *permanentError) Error() string { return e.msg }

// Retriable is false: retrying finds the server in the same shape.
func (e *permanentError) Retriable() bool { return false }

// transientError is a sentinel that a later try may not meet: it tells the
// relay's retry loop to try again.
type transientError struct{ msg string }

func transient(msg string) error { return &transientError{msg} }

func (e *transientError) Error() string { return e.msg }

// Retriable is true: the process holding the slot ends.
func (e *transientError) Retriable() bool { return true }
