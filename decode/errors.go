package decode

import "fmt"

// InvalidRowError is an outbox row that cannot become an event: a required
// column is NULL or missing, the headers column is not a JSON object, and so
// on. The stream must neither drop it silently nor crash on it; the caller
// decides (stop without confirming it, or dead-letter it).
type InvalidRowError struct {
	Table  string // schema.table
	ID     string // the row's id, when it could be read
	Reason string
}

func (e *InvalidRowError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("invalid outbox row %s in %s: %s", e.ID, e.Table, e.Reason)
	}
	return fmt.Sprintf("invalid outbox row in %s: %s", e.Table, e.Reason)
}
