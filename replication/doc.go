// Package replication owns the replication connection: START_REPLICATION
// from the slot's confirmed position, the receive loop, keepalives and
// standby status updates. It knows LSNs and bytes, not events: each
// pgoutput message goes to a handler, and the flushed position it reports
// comes from a Progress the caller provides. The slot and the publication
// it streams are package slot's.
package replication
