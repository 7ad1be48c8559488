// Package checklist is the shape of a preflight check's answer, shared by
// replication/ (Postgres items) and sink/ (Kafka items) and printed by
// `outbox-cdc check`.
package checklist

import (
	"fmt"
	"io"
	"strings"
)

// Status is how an item came out.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn" // works, but is risky or limited; not a failure
	Fail Status = "FAIL" // run will not work until it is fixed
	Skip Status = "skip" // not checked, because an earlier item failed
)

// Item is one line of the checklist.
type Item struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"` // what was found
	Fix    string `json:"fix,omitempty"`    // what to do, for Warn and Fail
}

// Print writes items one per line, each fix below its item, and returns how
// many failed.
func Print(w io.Writer, items []Item) (failed int) {
	for _, it := range items {
		line := fmt.Sprintf("[%-4s] %s", it.Status, it.Name)
		if it.Detail != "" {
			line += ": " + it.Detail
		}
		fmt.Fprintln(w, line)
		if it.Fix != "" && (it.Status == Fail || it.Status == Warn) {
			fmt.Fprintf(w, "       fix: %s\n", strings.ReplaceAll(it.Fix, "\n", "\n            "))
		}
		if it.Status == Fail {
			failed++
		}
	}
	return failed
}

// OneLine is err's message on one line: pgx lists each address it tried on
// a line of its own, and a checklist item is one line.
func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
