// Command orders-demo runs the example orders service once: it creates an
// order and pays it, each change with its event in one transaction, and
// tries a payment that fails, which writes nothing. Run outbox-cdc beside it
// and watch outbox.event.order.
//
//	go run ./examples/orders/cmd/orders-demo --postgres-url postgres://…
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-cdc/outbox-cdc/examples/orders"
	"github.com/outbox-cdc/outbox-cdc/outbox"
)

func main() {
	url := flag.String("postgres-url", os.Getenv("OUTBOX_CDC_POSTGRES_URL"), "Postgres connection string")
	table := flag.String("outbox-table", "public.outbox", "the outbox table outbox-cdc reads")
	flag.Parse()
	if err := run(*url, *table); err != nil {
		fmt.Fprintln(os.Stderr, "orders-demo:", err)
		os.Exit(1)
	}
}

func run(url, table string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := &orders.Service{DB: db, Outbox: outbox.NewWriter(outbox.Config{Table: table})}
	if err := svc.CreateTable(ctx); err != nil {
		return err
	}
	id := fmt.Sprintf("order-%d", time.Now().Unix())
	if err := svc.Create(ctx, id, 4250, "demo-1"); err != nil {
		return err
	}
	if err := svc.Pay(ctx, id, "demo-1", nil); err != nil {
		return err
	}
	fmt.Println("created and paid", id, "(two events)")
	declined := errors.New("card declined")
	other := id + "-b"
	if err := svc.Create(ctx, other, 999, "demo-2"); err != nil {
		return err
	}
	if err := svc.Pay(ctx, other, "demo-2", func() error { return declined }); !errors.Is(err, declined) {
		return fmt.Errorf("want the declined payment to roll back, got %v", err)
	}
	fmt.Println("created", other, "whose payment was declined: its OrderPaid was rolled back with the update")
	return nil
}
