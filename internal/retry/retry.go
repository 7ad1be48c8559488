// Package retry tells the relay's retry loop whether a failure is worth
// another session. Errors answer for themselves through a Retriable method,
// declared by each package next to its errors (decode, sink, slot, cleanup,
// replication), as pgconn.SafeToRetry asks pgx's; what does not answer is
// judged here only as the network's or a server's unavailability, and
// otherwise left unclassified for the loop to retry loudly and not for ever.
package retry

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
)

// Class is what a failure says of itself.
type Class int

const (
	Unclassified Class = iota // nobody said: retried loudly, and not for ever
	Transient                 // a new session may mend it: retried for as long as it lasts
	Permanent                 // a new session cannot mend it: the relay stops
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return "unclassified"
}

// retrier is an error that says whether trying again may help.
type retrier interface{ Retriable() bool }

// Classify asks err whether it can be retried. The first error in its chain
// that answers decides, so a publish error (sink.Error) keeps its own
// verdict over the network error it wraps; an error that does not answer is
// Transient when it is the network's or a server's unavailability.
func Classify(err error) Class {
	var r retrier
	switch {
	case err == nil:
		// A session that ended without a word: a new one picks up from
		// the slot, as after any interruption.
		return Transient
	case errors.As(err, &r):
		if r.Retriable() {
			return Transient
		}
		return Permanent
	case unavailable(err):
		return Transient
	}
	return Unclassified
}

// unavailable reports a failure of the network or of a server not serving
// for now: a connection refused, cut or timed out, Postgres shutting down,
// starting up or out of resources. These end when the outage does, however
// long it lasts.
func unavailable(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &connErr), pgconn.Timeout(err), pgconn.SafeToRetry(err), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded): // a dial or a request that a slow or absent server let time out
		return true
	case errors.As(err, &pgErr):
		// Class 08: connection exception; 40: transaction rollback
		// (deadlock, serialization failure); 53: insufficient resources
		// (too many connections, out of memory, disk full); 55: object not
		// in prerequisite state (a lock timeout, a standby's synchronized
		// slot that serves once promoted); 57: operator intervention
		// (shutting down, starting up, a statement timeout); 58: system
		// error (I/O). Each passes when the server's state does.
		return slices.Contains([]string{"08", "40", "53", "55", "57", "58"}, pgErr.Code[:min(2, len(pgErr.Code))])
	}
	return false
}

// Streak counts failures in a row that nobody classified. A failure known
// to be transient ends it, and so does progress (a session that began
// streaming, whatever ended it): only a relay that gets nowhere, for
// reasons nobody understands, sees it grow.
type Streak struct{ n int }

// Add notes one failure and returns the streak's length.
func (s *Streak) Add(c Class, progressed bool) int {
	if progressed || c != Unclassified {
		s.n = 0
		return 0
	}
	s.n++
	return s.n
}

// Innermost is the error at the bottom of err's chain (following the first
// of a join), whose type says what nobody classified.
func Innermost(err error) error {
	for {
		var next error
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			next = e.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := e.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}
