package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/metrics"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// run runs `outbox-cdc run`: the relay, with its metrics and probes served
// on --http-addr until it has drained.
func run(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	for _, w := range cfg.TransportWarnings() {
		log.Warn(w)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := relay.New(cfg, relay.WithLogger(log), relay.WithRegisterer(reg), relay.WithVersion(version))
	if err != nil {
		return err
	}
	var served sync.WaitGroup
	defer served.Wait()
	if cfg.HTTPAddr != "" {
		ln, err := metrics.Listen(cfg.HTTPAddr)
		if err != nil {
			return err
		}
		httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
		defer stopHTTP() // after the drain: probes and metrics answer until the end
		served.Go(func() {
			if err := metrics.Serve(httpCtx, ln, reg, r.Probe, log); err != nil {
				log.Error("http server stopped", slog.Any("err", err))
			}
		})
		log.Info("serving metrics and probes", slog.String("addr", ln.Addr().String()))
	}
	return r.Run(ctx)
}
