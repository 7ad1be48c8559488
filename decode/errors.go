package decode

import (
	"fmt"

	"github.com/jackc/pglogrepl"
)

// Reasons an outbox row cannot become an event. They are stable, short and
// meant for machines: dead-letter headers and metric labels carry them.
const (
	ReasonNullColumn       = "null_column"        // a required column is NULL
	ReasonEmptyAggregateID = "empty_aggregate_id" // the message key would be empty
	ReasonInvalidHeaders   = "invalid_headers"    // the headers column is not a JSON object
	ReasonInvalidBytea     = "invalid_bytea"      // a bytea payload not in hex output
	ReasonUnreadableColumn = "unreadable_column"  // binary or unchanged-TOAST value
	ReasonUnmappedTable    = "unmapped_table"     // the table lacks a mapped column (renamed or dropped)
)

// InvalidRowError is an outbox row that cannot become an event: a required
// column is NULL or missing, the headers column is not a JSON object, and so
// on. The stream must neither drop it silently nor crash on it; the caller
// decides (stop without confirming it, or dead-letter it), and has the row's
// columns at hand to do either.
type InvalidRowError struct {
	Table     string // schema.table
	ID        string // the row's id, when it could be read
	Reason    string // one of the Reason constants
	Detail    string // what is wrong, for people
	CommitLSN pglogrepl.LSN
	Xid       uint32
	Columns   []Column // every column of the row, in table order
	Mapping   Columns  // the table's column mapping, to find the id, key and payload among Columns
}

// Column is one column of an invalid row in its text form, owned by the error.
type Column struct {
	Name  string
	Value []byte // nil when Null
	Null  bool
}

func (e *InvalidRowError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("invalid outbox row %s in %s (%s): %s", e.ID, e.Table, e.Reason, e.Detail)
	}
	return fmt.Sprintf("invalid outbox row in %s (%s): %s", e.Table, e.Reason, e.Detail)
}

// Retriable is false: the row reads the same in every session, so the
// relay's retry loop stops on it rather than meet it again.
func (e *InvalidRowError) Retriable() bool { return false }

// Column returns the named column's value and whether it is present and not
// NULL.
func (e *InvalidRowError) Column(name string) ([]byte, bool) {
	for _, c := range e.Columns {
		if c.Name == name {
			return c.Value, !c.Null
		}
	}
	return nil, false
}
