package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/outbox"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// A service runs the relay beside its own work: one deployable, its own
// logger and metrics registry, and the relay's readiness in its own health
// endpoint. Here the service writes one event as an outbox row and one as a
// message, and stops; the relay drains and returns nil.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := testkit.CreateTable(ctx, pgURL, "example_outbox", testkit.DefaultColumns); err != nil { // sql/publication.sql's table
		fmt.Println(err)
		return
	}

	cfg := relay.Default()
	cfg.PostgresURL = pgURL
	cfg.Kafka.Brokers = []string{kafkaBrokers}
	cfg.Slot.Name, cfg.Slot.Publication = "example", "example"
	cfg.Defaults.Route.Topic = "example.{aggregate_type}"
	cfg.Messages.Prefix = "example" // routed as cfg.Defaults.Route says
	cfg.Tables = []relay.Table{cfg.Table("public.example_outbox")}
	r, err := relay.New(cfg,
		relay.WithLogger(slog.New(slog.DiscardHandler)), // the service's own logger
		relay.WithRegisterer(prometheus.NewRegistry()))  // its own registry
	if err != nil {
		fmt.Println(err)
		return
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.Run(ctx) }()
	for r.Ready(ctx) != nil { // what a /readyz handler would ask
		time.Sleep(50 * time.Millisecond)
	}

	db, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	w := outbox.NewWriter(outbox.Config{Table: "public.example_outbox", MessagePrefix: "example"})
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// ... the business change, then its events, in one transaction:
		if _, err := w.Write(ctx, tx, outbox.Event{AggregateType: "order", AggregateID: "o-1", EventType: "OrderPlaced",
			Payload: map[string]int{"total": 42}}); err != nil {
			return err
		}
		_, err := w.Emit(ctx, tx, outbox.Event{AggregateType: "order", AggregateID: "o-1", EventType: "OrderPaid",
			Payload: map[string]string{"by": "card"}})
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	kr := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.Kafka.Brokers, Topic: "example.order", MaxWait: 50 * time.Millisecond})
	defer kr.Close()
	for range 2 {
		m, err := kr.ReadMessage(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s key=%s %s\n", m.Topic, m.Key, m.Value)
	}

	stop() // the service shuts down: the relay drains, confirms and returns
	fmt.Println("relay stopped:", <-stopped)
	// Output:
	// example.order key=o-1 {"total": 42}
	// example.order key=o-1 {"by":"card"}
	// relay stopped: <nil>
}
