package relay

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/delivery"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// newDelivery wires the relay's delivery mode (package delivery): the
// pipeline, the sessions and the backfill call it and never ask which mode
// it is. It lasts as long as the relay. The error is delivery's refusal of
// a func it needs and was not given: a bug here, not a configuration
// mistake.
func (r *Relay) newDelivery() (delivery.Mode, error) {
	cfg := r.cfg
	return delivery.New(delivery.Config{
		Mode: cfg.Delivery.Mode, Slot: cfg.Slot.Name, TransactionalID: cfg.TransactionalID,
		CheckpointTopic: cfg.Delivery.CheckpointTopic, CheckpointReplicationFactor: cfg.Delivery.CheckpointReplicationFactor,
		TransactionInterval: cfg.Delivery.TransactionInterval, TransactionTimeout: cfg.Delivery.TransactionTimeout,
		Cleanup: cfg.Cleanup != cleanup.None, MaxInFlight: cfg.Stream.MaxInFlight, ForcedBackfill: r.backfilled() && cfg.BackfillForce,
	}, delivery.Env{
		Log: r.log, Outage: r.outage,
		Connect:     func() *producer.Cluster { return producer.Connect(r.security, cfg.Kafka.Brokers, 0) },
		Transaction: r.metrics.Transaction, FailoverGhosts: r.metrics.FailoverGhosts, TransactionTimedOut: r.metrics.TransactionTimedOut,
		Identify: func(ctx context.Context) (replication.System, error) {
			return replication.Identify(ctx, cfg.PostgresURL)
		},
		SlotPosition: r.slotPosition,
		NextXid:      func(ctx context.Context) (uint64, error) { return serverNextXid(ctx, cfg.PostgresURL) },
	})
}

// slotPosition is the slot's confirmed position.
func (r *Relay) slotPosition(ctx context.Context) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	return slot.Confirmed(ctx, conn, r.cfg.Slot.Name)
}

// serverNextXid is the next full transaction id of the server at url: the
// xmax of a snapshot, which assigns no id (pg_current_xact_id would) and
// answers on a standby too.
func serverNextXid(ctx context.Context, url string) (uint64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	var text string
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&text); err != nil {
		return 0, fmt.Errorf("read the server's next transaction id: %w", err)
	}
	next, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the server's next transaction id: %q: %w", text, err)
	}
	return next, nil
}
