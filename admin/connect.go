package admin

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/relay"
)

// Connect opens an ordinary connection to url for setup and status; its
// error says what to look at (relay.PostgresHint).
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres (%s): %w", relay.PostgresHint(err), err)
	}
	return conn, nil
}
