package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/metrics"
	"github.com/outbox-cdc/outbox-cdc/relay"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// runExit runs `outbox-cdc run` and says how it ended: a usage error (a
// setting to fix, a column the table lacks) or another failure.
func runExit(ctx context.Context, cfg config.Config, log *slog.Logger, stderr io.Writer, red redactor, environ []string) int {
	if n := maxProcs(cfg.MaxProcs, environ); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	if path := os.Getenv("OUTBOX_CDC_CPUPROFILE"); path != "" {
		// A debugging aid for the benchmark: a CPU profile of the whole run.
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if err := run(ctx, cfg, log, notifyOptions(environ, log)...); err != nil {
		err = config.Explain(err) // a setting relay.New refused, by its flag
		fmt.Fprintf(stderr, "outbox-cdc: %s\n", red.oneLine(err))
		var usage *config.UsageError
		if errors.Is(err, slot.ErrColumnMissing) || errors.As(err, &usage) {
			return exitUsage
		}
		return exitFailure
	}
	log.Info("stopped")
	return exitOK
}

// run runs `outbox-cdc run`: the relay, with its metrics and probes served
// on --http-addr until it has drained; opts are the relay's besides its
// logger, metrics and version (notifyOptions').
func run(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...relay.Option) error {
	for _, w := range append(cfg.TransportWarnings(), cfg.Deprecations...) {
		log.Warn(w)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := relay.New(cfg.Relay, append(opts, relay.WithLogger(log), relay.WithRegisterer(reg), relay.WithVersion(version))...)
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

// maxProcs is the GOMAXPROCS --max-procs asks for, 0 to leave Go's: when
// it is 0, or a GOMAXPROCS variable is set (Go applied that already, and
// an operator who set it meant it).
func maxProcs(flag int, environ []string) int {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return 0 // Go ignores an empty, zero or malformed one
			}
		}
	}
	return flag
}
