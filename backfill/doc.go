// Package backfill reads what a slot cannot replay: the outbox rows
// committed before the slot existed, from the snapshot the slot exported
// when it was created. Prepare plans (which tables are due, creating the
// slot when there is none), Run reads each table in an order that follows
// commit order per aggregate and hands its rows to the pipeline through an
// Entry, and a table beside the outbox keeps the progress (a Counter of
// rows acknowledged in read order), so that a backfill cut short resumes
// exactly. The operator's --backfill-where is checked before any use: a
// guarded predicate, never executed as written.
package backfill
