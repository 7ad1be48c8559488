package slot

import "errors"

var (
	// ErrNotReady is a server, role, table, publication or slot that is not
	// in the shape outbox-cdc needs; the message says what to change.
	ErrNotReady = errors.New("postgres not ready for outbox-cdc")
	// ErrColumnMissing is a configured column the outbox table lacks: a
	// --column-* flag to fix.
	ErrColumnMissing = errors.New("outbox column missing")
	// ErrSlotInvalidated is a slot whose WAL was removed: streaming from it
	// would skip events, so outbox-cdc refuses and says how to recover.
	ErrSlotInvalidated = errors.New("replication slot invalidated")
	// ErrNoSlot is a slot that does not exist (see ReadSlotState).
	ErrNoSlot = errors.New("replication slot does not exist")
)
