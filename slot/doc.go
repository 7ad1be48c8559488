// Package slot manages what the replication stream reads from: the server's
// readiness, the publication, the logical replication slot (created
// failover-enabled where it can be), their state for status and metrics,
// the heartbeat that keeps an idle outbox from pinning WAL, and the SQL
// that setup prints or runs. The stream itself is package replication's.
package slot
