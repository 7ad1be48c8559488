package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/redact"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Listen binds addr, so that a port in use is reported at start.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --http-addr %s: %w", addr, err)
	}
	return ln, nil
}

// Serve answers on ln until ctx ends:
//
//	/metrics  Prometheus text format
//	/healthz  200 while the process runs
//	/readyz   200 when ready() returns nil, else 503 with its error;
//	          /readyz?standby=ok is ready(ctx, true): a healthy standby
//	          counts as ready (the Kubernetes readiness probe, see
//	          deploy/kubernetes)
func Serve(ctx context.Context, ln net.Listener, g prometheus.Gatherer, ready func(ctx context.Context, standbyOK bool) error, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := ready(ctx, r.URL.Query().Get("standby") == "ok"); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			// Redacted as the logs are: a driver's error may quote the
			// connection string, and /readyz is often reachable by more
			// people than the logs.
			fmt.Fprintln(w, "not ready:", redact.String(err.Error()))
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stopped := make(chan struct{})
	go func() { // owned by Serve: ends once ctx does
		defer close(stopped)
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	err := srv.Serve(ln)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
}
