// Package backfill reads what a slot cannot replay: the outbox rows
// committed before the slot existed, from the snapshot the slot exported
// when it was created. It checks the operator's --backfill-where before any
// use (a guarded predicate, never executed as written), reads rows in an
// order that follows commit order per aggregate, and keeps its progress in
// a table beside the outbox, so that a backfill cut short resumes exactly.
package backfill
