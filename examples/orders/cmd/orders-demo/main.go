// Command orders-demo runs the example orders service once: it creates an
// order and pays it, each change with its event in one transaction, and
// tries a payment that fails, which writes nothing. Run outbox-cdc beside it
// and watch outbox.event.order:
//
//	go run ./examples/orders/cmd/orders-demo --postgres-url postgres://…
//
// With --relay the service runs the relay itself, in-process (package
// relay): one deployable that writes its events and relays them, configured
// by the same OUTBOX_CDC_* environment as the outbox-cdc binary, with its
// readiness and metrics on the service's own HTTP server (--http-addr). It
// then keeps running until SIGINT or SIGTERM, when the relay drains and both
// stop together:
//
//	OUTBOX_CDC_KAFKA_BROKERS=127.0.0.1:9092 go run ./examples/orders/cmd/orders-demo --relay --postgres-url postgres://…
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/examples/orders"
	"github.com/outbox-cdc/outbox-cdc/outbox"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

func main() {
	url := flag.String("postgres-url", os.Getenv("OUTBOX_CDC_POSTGRES_URL"), "Postgres connection string")
	table := flag.String("outbox-table", "public.outbox", "the outbox table outbox-cdc reads")
	inProcess := flag.Bool("relay", false, "run the relay in-process, configured by OUTBOX_CDC_* variables, until SIGINT or SIGTERM")
	httpAddr := flag.String("http-addr", "127.0.0.1:0", "with --relay: the service's /readyz (the relay's readiness) and /metrics")
	flag.Parse()
	var err error
	if *inProcess {
		err = withRelay(*url, *table, *httpAddr)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = once(ctx, *url, *table)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders-demo:", err)
		os.Exit(1)
	}
}

// once runs the scenario.
func once(ctx context.Context, url, table string) error {
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := &orders.Service{DB: db, Outbox: outbox.NewWriter(outbox.Config{Table: table})}
	if err := svc.CreateTable(ctx); err != nil {
		return err
	}
	id := fmt.Sprintf("order-%d", time.Now().UnixNano())
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

// withRelay runs the relay beside the service until a signal, then stops
// both: the relay drains what is in flight and confirms it.
func withRelay(url, table, httpAddr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The binary's configuration, from the environment; the flags given
	// here win, so that the service and the relay agree on the table.
	cfg, err := config.Parse(config.CmdRun, []string{"--postgres-url", url, "--table", table}, os.Environ(), io.Discard)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "relay")
	reg := prometheus.NewRegistry()
	r, err := relay.New(cfg.Relay, relay.WithLogger(log), relay.WithRegisterer(reg))
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.Run(ctx) }() // ends after ctx, once drained

	// The service's own HTTP server: its readiness is the relay's.
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		stop()
		return errors.Join(err, <-stopped)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		if err := r.Ready(req.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // ends with Shutdown below
	fmt.Printf("service http on %s\n", ln.Addr())

	err = func() error {
		for r.Ready(ctx) != nil {
			select {
			case err := <-stopped:
				stopped <- err
				return fmt.Errorf("relay stopped before it was ready: %w", err)
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err := once(ctx, url, table); err != nil {
			return err
		}
		fmt.Println("relay running in-process; SIGINT or SIGTERM stops the service and the relay")
		<-ctx.Done()
		return nil
	}()
	stop()
	relayErr := <-stopped
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	<-served
	if relayErr == nil {
		fmt.Println("relay stopped: drained and confirmed")
	}
	return errors.Join(err, relayErr)
}
