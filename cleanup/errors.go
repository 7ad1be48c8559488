package cleanup

// ErrNotReady is a table that cleanup cannot work on as configured (no such
// column, no unique index, a missing privilege); the message says what to
// change.
var ErrNotReady error = &permanentError{"outbox table not ready for --cleanup"}

// permanentError is a sentinel that a person must act on: it tells the
// relay's retry loop, which asks errors whether they are Retriable, that a
// new session cannot mend it. errors.Is matches the sentinel's pointer.
type permanentError struct{ msg string }

func (e *permanentError) Error() string { return e.msg }

// Retriable is false: the table stays as it is until a person changes it.
func (e *permanentError) Retriable() bool { return false }
