// Package orders is an example service that uses the transactional outbox:
// each change to an order and the event that announces it are written in one
// transaction, through outbox.Writer. outbox-cdc relays the events from the
// WAL; a transaction that rolls back leaves neither the change nor the event.
package orders

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-cdc/outbox-cdc/outbox"
)

// Service owns the orders table.
type Service struct {
	DB     *pgxpool.Pool
	Outbox *outbox.Writer
	Table  string // the orders table; default orders
}

func (s *Service) table() string {
	if s.Table == "" {
		return "orders"
	}
	return s.Table
}

// CreateTable creates the orders table when missing.
func (s *Service) CreateTable(ctx context.Context) error {
	_, err := s.DB.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
		id text PRIMARY KEY, status text NOT NULL, total_cents bigint NOT NULL)`, pgx.Identifier{s.table()}.Sanitize()))
	return err
}

// OrderCreated and OrderPaid are the events' payloads.
type OrderCreated struct {
	ID         string `json:"id"`
	TotalCents int64  `json:"total_cents"`
}

type OrderPaid struct {
	ID string `json:"id"`
}

// Create inserts an order and its OrderCreated event.
func (s *Service) Create(ctx context.Context, id string, totalCents int64, correlationID string) error {
	return pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, status, total_cents) VALUES ($1, 'new', $2)`,
			pgx.Identifier{s.table()}.Sanitize()), id, totalCents); err != nil {
			return fmt.Errorf("create order %s: %w", id, err)
		}
		_, err := s.Outbox.Write(ctx, tx, outbox.Event{
			AggregateType: "order", AggregateID: id, EventType: "OrderCreated",
			Payload: OrderCreated{ID: id, TotalCents: totalCents},
			Headers: map[string]string{"correlation_id": correlationID},
		})
		return err
	})
}

// Pay marks an order paid and writes OrderPaid. beforeCommit runs last in
// the transaction (a payment provider's answer, say): an error from it rolls
// back both the update and the event.
func (s *Service) Pay(ctx context.Context, id, correlationID string, beforeCommit func() error) error {
	return pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET status = 'paid' WHERE id = $1 AND status = 'new'`,
			pgx.Identifier{s.table()}.Sanitize()), id)
		if err != nil {
			return fmt.Errorf("pay order %s: %w", id, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("pay order %s: no such unpaid order", id)
		}
		if _, err := s.Outbox.Write(ctx, tx, outbox.Event{
			AggregateType: "order", AggregateID: id, EventType: "OrderPaid",
			Payload: OrderPaid{ID: id}, Headers: map[string]string{"correlation_id": correlationID},
		}); err != nil {
			return err
		}
		if beforeCommit != nil {
			return beforeCommit()
		}
		return nil
	})
}
