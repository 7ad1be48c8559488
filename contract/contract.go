package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

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
// says where the payload fails. The payload is read once, by the
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

// violation locates the first failure of verr: the deepest error along
// its first causes, as the spec's detailed output lists it.
func (s *Set) violation(eventType string, c contract, verr *jsonschema.ValidationError) *Violation {
	u := verr.DetailedOutput()
	for len(u.Errors) > 0 {
		u = &u.Errors[0]
	}
	v := &Violation{EventType: eventType, File: c.file, InstanceLocation: u.InstanceLocation,
		KeywordLocation: u.KeywordLocation, Err: errors.New("validation failed")}
	if u.Error != nil {
		v.Err = errors.New(u.Error.String())
	}
	// Where the keyword is when it lies in another file, through a $ref;
	// relative to the directory when it is in it.
	if abs := u.AbsoluteKeywordLocation; abs != "" && !strings.HasPrefix(abs, c.url+"#") {
		v.AbsoluteKeywordLocation = strings.TrimPrefix(abs, s.base)
	}
	return v
}

// Violation is a payload its contract refuses, or an event type without a
// contract (Missing). Its Location is short enough for a Kafka header.
type Violation struct {
	EventType string
	// Missing says the event type has no contract, and
	// UnknownDeadLetter refuses such events.
	Missing bool
	File    string // the contract, relative to the directory
	// InstanceLocation is the failing value's JSON Pointer in the payload
	// ("" for the whole payload); KeywordLocation the failing keyword's,
	// from the contract's root through any $ref, as in JSON Schema's
	// output formats: both empty when the payload is not JSON.
	InstanceLocation, KeywordLocation string
	// AbsoluteKeywordLocation is the failing keyword's own location when
	// a $ref led into another file: file#pointer, the file relative to the
	// directory (or its $id).
	AbsoluteKeywordLocation string
	Err                     error // what failed, for people
}

func (v *Violation) Error() string {
	switch {
	case v.Missing:
		return v.Err.Error()
	case v.KeywordLocation == "" && v.InstanceLocation == "":
		return fmt.Sprintf("contract %s: %v", v.File, v.Err)
	}
	return fmt.Sprintf("contract %s: at %q (%s): %v", v.File, v.InstanceLocation, v.keyword(), v.Err)
}

func (v *Violation) Unwrap() error { return v.Err }

func (v *Violation) keyword() string {
	if v.AbsoluteKeywordLocation != "" {
		return v.AbsoluteKeywordLocation
	}
	return "#" + v.KeywordLocation
}

// MissingContract answers sink: the event type has no contract at all.
func (v *Violation) MissingContract() bool { return v.Missing }

// Location is where the payload failed, as a small JSON object with the
// output formats' names: {"instanceLocation":"/amount",
// "keywordLocation":"/properties/amount/type"}, and
// "absoluteKeywordLocation" when a $ref led into another file. Empty for
// a missing contract.
func (v *Violation) Location() string {
	if v.Missing {
		return ""
	}
	b, _ := json.Marshal(struct {
		Instance string `json:"instanceLocation"`
		Keyword  string `json:"keywordLocation"`
		Absolute string `json:"absoluteKeywordLocation,omitempty"`
	}{v.InstanceLocation, v.KeywordLocation, v.AbsoluteKeywordLocation})
	return string(b)
}
