package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// violation locates the first failure of verr: the deepest error along
// its first causes, as the spec's detailed output lists it.
func (s *Set) violation(eventType string, c contract, verr *jsonschema.ValidationError) *Violation {
	u := verr.DetailedOutput()
	for len(u.Errors) > 0 {
		u = &u.Errors[0]
	}
	v := &Violation{EventType: eventType, File: c.file, InstanceLocation: contractPointer(u.InstanceLocation, u.KeywordLocation),
		KeywordLocation: u.KeywordLocation, Err: errors.New("validation failed")}
	if u.Error != nil {
		v.Err = errors.New(rule(u.Error))
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
	// OverBudget says the payload was not validated: checking it could
	// take more steps than its budget (see budgetFor).
	OverBudget bool
	File       string // the contract, relative to the directory
	// InstanceLocation is the failing value's JSON Pointer in the payload
	// ("" for the whole payload), each property name the contract does
	// not name itself written "*" (see contractPointer); KeywordLocation
	// the failing keyword's,
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

// BudgetExceeded answers sink: the payload was not validated, its cost
// over the budget.
func (v *Violation) BudgetExceeded() bool { return v.OverBudget }

// Location is where the payload failed, as a small JSON object with the
// output formats' names: {"instanceLocation":"/amount",
// "keywordLocation":"/properties/amount/type"}, and
// "absoluteKeywordLocation" when a $ref led into another file. Empty for
// a missing contract and a payload over the budget.
func (v *Violation) Location() string {
	if v.Missing || v.OverBudget {
		return ""
	}
	b, _ := json.Marshal(struct {
		Instance string `json:"instanceLocation"`
		Keyword  string `json:"keywordLocation"`
		Absolute string `json:"absoluteKeywordLocation,omitempty"`
	}{v.InstanceLocation, v.KeywordLocation, v.AbsoluteKeywordLocation})
	return string(b)
}
