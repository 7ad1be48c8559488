package checkpoint

var (
	// ErrUnsupportedVersion is a checkpoint record in a format major version
	// this build does not read (a newer outbox-cdc wrote it): the relay must
	// not start from a position it cannot interpret.
	ErrUnsupportedVersion = permanent("unsupported checkpoint format")
	// ErrBadRecord is a checkpoint record that is not one (not JSON, fields
	// missing or out of range): someone else wrote under the key.
	ErrBadRecord = permanent("malformed checkpoint record")
	// ErrNotCompacted is an existing checkpoint topic whose cleanup.policy
	// is not compact: retention would delete an idle slot's last checkpoint
	// (producer.Cluster.EnsureCheckpointTopic returns it).
	ErrNotCompacted = permanent("checkpoint topic is not compacted")
	// ErrRestored is a checkpoint naming a transaction the server has not
	// assigned yet: the database went back in time (restored from a
	// snapshot or a backup) and starting at the checkpoint would skip the
	// new transactions that reuse its positions.
	ErrRestored = permanent("the checkpoint names a transaction the server has not assigned")
)

// permanentError is a sentinel a person must act on (a topic config, an
// upgrade): it tells the relay's retry loop, which asks errors whether they
// are Retriable, that a new session cannot mend it. Each sentinel is its own
// pointer, so errors.Is matches it and nothing else.
type permanentError struct{ msg string }

func permanent(msg string) error { return &permanentError{msg} }

func (e *permanentError) Error() string { return e.msg }

// Retriable is false: retrying finds the same record, the same topic.
func (e *permanentError) Retriable() bool { return false }
