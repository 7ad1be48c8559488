// Package admin answers an operator's questions about a relay.Config
// without running the relay: is every server ready for it (Check), what
// must be created and granted (Plan, Apply), and where its slot stands
// (Status). Each answer is data (checklist items, statements, a report with
// JSON tags); cmd/outbox-cdc prints it as text or JSON and picks the exit
// code, so that the decisions live here, where they are tested.
package admin
