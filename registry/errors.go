package registry

import (
	"fmt"
	"net/http"
)

// Error is a registry request that failed: no answer (Err), or an answer
// other than success (Status, with the registry's own Code and Message).
// It says itself whether trying again may help (Retriable) and whether
// the registry refused the contract itself (Refused), so that sink
// branches on that and not on status codes.
type Error struct {
	Subject string
	Status  int    // the HTTP status; 0 when the registry did not answer
	Code    int    // the registry's error_code, such as 40901; 0: none given
	Message string // the registry's message, for people
	Err     error  // why there was no answer; nil when there was one
}

func (e *Error) Error() string {
	switch {
	case e.Status == 0:
		return fmt.Sprintf("schema registry, subject %s: %v", e.Subject, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("schema registry, subject %s: %d answer: %v", e.Subject, e.Status, e.Err)
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("schema registry, subject %s: %d %s", e.Subject, e.Status, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Retriable says the same request may succeed later: the registry did not
// answer, or answered 5xx, 408 or 429 (down, overloaded, its storage away).
// Anything else is an answer about this request (the contract refused, the
// credentials, the URL), which asking again does not change.
func (e *Error) Retriable() bool {
	return e.Status == 0 || e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests ||
		e.Status == http.StatusUnprocessableEntity && e.Code == codeReadOnly
}

// Confluent's error codes under 422 that say something other than "this
// schema is invalid".
const (
	codeInvalidSchema = 42201 // the schema itself
	codeReadOnly      = 42205 // the registry or subject is read-only (maintenance): it passes
)

// Refused says the registry refused the contract itself: incompatible
// with the subject's latest version under its compatibility rule (409), or
// not a schema it accepts (422, error_code 42201 or none). Events of that
// type and topic cannot be framed; other types and topics are unaffected.
// A 422 for a registry in read-only mode is no refusal: it passes
// (Retriable).
func (e *Error) Refused() bool {
	return e.Status == http.StatusConflict ||
		e.Status == http.StatusUnprocessableEntity && (e.Code == 0 || e.Code == codeInvalidSchema)
}

// RegistryMessage is the registry's own account of the failure, for the
// dead letter's header.
func (e *Error) RegistryMessage() string {
	if e.Code != 0 {
		return fmt.Sprintf("%d %s (error_code %d)", e.Status, e.Message, e.Code)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Message)
}
