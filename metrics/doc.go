// Package metrics is how operators see the relay: Prometheus metrics fed by
// sink/ (through sink.Observer), by the replication session and by the slot
// watcher, and the HTTP server for /metrics, /healthz and /readyz. It holds
// no pipeline logic; cmd/outbox-cdc wires it in.
package metrics
