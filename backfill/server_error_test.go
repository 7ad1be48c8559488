package backfill

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestServerErrorIsBrief: a Postgres error the backfill reports (and the
// relay logs) says its SQLSTATE and the start of its message on one line,
// never the rest of a message that may quote what the statement read, nor
// its detail; callers still classify it by code.
func TestServerErrorIsBrief(t *testing.T) {
	dump := `invalid input syntax for type integer: "<db xmlns:xsi="">` + "\n\n<public>\n<users>\n" + strings.Repeat("<row><password>hunter2</password></row>\n", 500) + `<last/>"`
	pg := &pgconn.PgError{Severity: "ERROR", Code: "22P02", Message: dump, Detail: "the detail", Where: "the where"}
	err := fmt.Errorf("read rows of %s: %w", `"public"."outbox"`, brief(fmt.Errorf("wrapped: %w", pg)))
	msg := err.Error()
	if len(msg) > 300 || strings.Contains(msg, "<last/>") || strings.Contains(msg, "detail") || strings.Contains(msg, "\n") {
		t.Errorf("%d bytes: %q; want one line of at most 300 bytes, without the message's tail or the detail", len(msg), msg)
	}
	if !strings.Contains(msg, "SQLSTATE 22P02") || !strings.Contains(msg, "invalid input syntax for type integer") {
		t.Errorf("%q: want the SQLSTATE and the start of the message", msg)
	}
	var got *pgconn.PgError
	if !errors.As(err, &got) || got.Code != "22P02" {
		t.Errorf("errors.As finds %v, want the server's error, for its code", got)
	}
	short := &pgconn.PgError{Severity: "ERROR", Code: "42703", Message: `column "nope" does not exist`}
	if msg := brief(short).Error(); msg != `ERROR: column "nope" does not exist (SQLSTATE 42703)` {
		t.Errorf("a short message: %q, want it whole", msg)
	}
	other := errors.New("conn closed")
	if brief(other) != other || brief(nil) != nil {
		t.Error("an error not from the server, or none, is not returned as it was")
	}
	// A cut in the middle of a multi-byte character leaves valid UTF-8.
	long := &pgconn.PgError{Code: "22P02", Message: strings.Repeat("é", 300)}
	if msg := brief(long).Error(); !strings.HasSuffix(msg, "… (SQLSTATE 22P02)") || strings.ContainsRune(msg, '\uFFFD') {
		t.Errorf("%q", msg)
	}
}
