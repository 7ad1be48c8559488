package backfill

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// maxServerMessage bounds how much of a server error's message the
// backfill repeats.
const maxServerMessage = 200

// serverError is a Postgres error as the backfill reports it: its
// severity, the start of its message on one line, and its SQLSTATE. The
// server's message may quote a value the statement read (invalid input
// syntax for type integer: "…" quotes the whole value, however long), and
// what the backfill reports ends up in log lines; its Detail, Hint and
// Where are left out for the same reason. The *pgconn.PgError stays
// reachable (errors.As) for whoever classifies it by code.
type serverError struct{ pg *pgconn.PgError }

func (e serverError) Error() string {
	msg := strings.Join(strings.Fields(e.pg.Message), " ")
	if len(msg) > maxServerMessage {
		msg = strings.ToValidUTF8(msg[:maxServerMessage], "") + "…"
	}
	if e.pg.Severity != "" {
		msg = e.pg.Severity + ": " + msg
	}
	return msg + " (SQLSTATE " + e.pg.Code + ")"
}

func (e serverError) Unwrap() error { return e.pg }

// brief returns err as serverError when the server sent it (whatever
// wraps it, whose text would repeat the message), else err as it is.
func brief(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return serverError{pg}
	}
	return err
}
