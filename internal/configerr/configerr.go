// Package configerr is the error of a configuration setting that cannot
// work, shared by the rooms that validate their own settings (relay,
// sink): it names the setting by its path in the struct validated, and
// lets the command line say the same thing in terms of its flags.
package configerr

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Error is a setting that cannot work, found before any I/O. Field is its
// path in the struct validated, as a Go program sets it; the message may
// name other settings too. Error says all of them as Go paths; Render lets
// another audience (the command line's flags) name them its own way.
type Error struct {
	// Field is the setting to fix, such as Producer.BatchSize or
	// Tables[1].Columns.ID; empty: several, or none in particular.
	Field string

	// format is the message, its settings written as references:
	// {Path} names a setting, {Path=value} the setting given a value, and
	// {*Path} (or {*Path=value}) the setting with every way to give it,
	// for a message that asks for it. Paths are relative to the struct
	// validated; In makes them relative to one holding it.
	format string
	args   []any
}

// New returns the error of field, its message format and args as for
// fmt.Errorf (a %w verb makes the cause Unwrap's), its settings written
// as references (see Error.format).
func New(field, format string, args ...any) *Error {
	return &Error{Field: field, format: format, args: args}
}

// Ref is a setting a message names.
type Ref struct {
	Field string // its path
	Value string // the value it is given; empty: none said
	// Sources: the message asks for the setting, so it is named with
	// every way to give it (the command line: its flag and its variable).
	Sources bool
}

// GoName is how Error names r: Field, or Field=Value.
func GoName(r Ref) string {
	if r.Value != "" {
		return r.Field + "=" + r.Value
	}
	return r.Field
}

// ref matches a reference in a message: {Path}, {Path=value}, {*Path}.
var ref = regexp.MustCompile(`\{(\*?)([A-Z][A-Za-z0-9]*(?:\[\d+\])?(?:\.[A-Z][A-Za-z0-9]*(?:\[\d+\])?)*)(?:=([^{}]*))?\}`)

// Render is the message with each setting named by name.
func (e *Error) Render(name func(Ref) string) string {
	format := ref.ReplaceAllStringFunc(e.format, func(m string) string {
		sub := ref.FindStringSubmatch(m)
		n := name(Ref{Field: sub[2], Value: sub[3], Sources: sub[1] == "*"})
		return strings.ReplaceAll(n, "%", "%%")
	})
	return fmt.Errorf(format, e.args...).Error()
}

// Error is the message, its settings named as Go paths.
func (e *Error) Error() string { return e.Render(GoName) }

// Unwrap is the cause the message wraps with %w, if any.
func (e *Error) Unwrap() error { return errors.Unwrap(fmt.Errorf(e.format, e.args...)) }

// In is e as seen from a struct holding the one validated at path (such as
// Tables[2] or Kafka.SASL): Field and every reference prefixed by path.
func (e *Error) In(path string) *Error {
	c := *e
	if c.Field != "" {
		c.Field = path + "." + c.Field
	}
	c.format = ref.ReplaceAllStringFunc(e.format, func(m string) string {
		sub := ref.FindStringSubmatch(m)
		return "{" + sub[1] + path + "." + m[len(sub[1])+1:]
	})
	return &c
}

// In is err seen from a struct holding the one validated at path, when err
// is an *Error; any other error is returned as it is.
func In(path string, err error) error {
	var e *Error
	if errors.As(err, &e) && e == err {
		return e.In(path)
	}
	return err
}
