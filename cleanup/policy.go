package cleanup

// Policy is what becomes of an outbox row once its event is in Kafka.
type Policy string

// Policies (--cleanup).
const (
	// None leaves rows as they are.
	None Policy = "none"
	// DeleteAfterPublish deletes each row (by its id column, which must be
	// unique) once Kafka acknowledged its event, before its position is
	// confirmed; dead-lettered rows are kept.
	DeleteAfterPublish Policy = "delete-after-publish"
	// Mark updates each row instead, as the table's Mark (and MarkDead)
	// say.
	Mark Policy = "mark"
)
