package contract

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Unknown is what becomes of an event whose type has no contract.
type Unknown string

// Values of Unknown.
const (
	UnknownAllow      Unknown = "allow"       // published unchecked
	UnknownDeadLetter Unknown = "dead-letter" // refused: a *Violation with Missing set
)

// Set is the compiled contracts of one directory, one schema per event
// type. It is safe for concurrent use: a session and a backfill validate
// through the same Set.
type Set struct {
	dir       string // as given, for messages
	base      string // the directory's file URL, with a trailing slash
	unknown   Unknown
	contracts map[string]contract
}

type contract struct {
	file   string // relative to the directory, slash-separated
	url    string // the file's URL, which locations are relative to
	schema *jsonschema.Schema
	screen *screen // the fast path; nil: jsonschema alone
	doc    []byte  // the file as read, for a schema registry
}

// EventTypes returns the event types that have a contract, sorted.
func (s *Set) EventTypes() []string {
	types := make([]string, 0, len(s.contracts))
	for t := range s.contracts {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// File returns the file of eventType's contract, relative to the
// directory (slash-separated), and whether the type has a contract.
func (s *Set) File(eventType string) (string, bool) {
	c, ok := s.contracts[eventType]
	return filepath.FromSlash(c.file), ok
}

// Document returns eventType's contract as its file held it when the Set
// was loaded (what a schema registry is given: the very schema payloads
// were checked against, even if the file changed since), and whether the
// type has a contract.
func (s *Set) Document(eventType string) ([]byte, bool) {
	c, ok := s.contracts[eventType]
	return c.doc, ok
}

// Validate returns nil when payload meets eventType's contract, or when the
// type has none and unknown types are allowed; otherwise a *Violation that
// says where the payload fails, or that checking it would cost more than
// its budget (OverBudget), which the validator is then not asked to. The payload is read once, by the
// contract's screen, when it passes; otherwise decoded once, here.
func (s *Set) Validate(eventType string, payload []byte) error {
	c, ok := s.contracts[eventType]
	if !ok {
		if s.unknown == UnknownDeadLetter {
			return &Violation{EventType: eventType, Missing: true,
				Err: fmt.Errorf("event type %q has no contract in %s (--contracts-unknown=dead-letter)", eventType, s.dir)}
		}
		return nil
	}
	if c.screen != nil && c.screen.passes(payload) {
		return nil
	}
	v, err := decodeJSON(payload)
	if err != nil {
		return &Violation{EventType: eventType, File: c.file, Err: err}
	}
	if budget := budgetFor(len(payload)); steps(c.schema, v, budget) > budget {
		return &Violation{EventType: eventType, File: c.file, OverBudget: true,
			Err: fmt.Errorf("not validated: checking this payload could take over %d steps, the budget of %d bytes (anyOf or oneOf under a recursive $ref can make the cost exponential in the payload's nesting; see outbox-cdc check)", budget, len(payload))}
	}
	err = c.schema.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &Violation{EventType: eventType, File: c.file, Err: err}
	}
	return s.violation(eventType, c, verr)
}
