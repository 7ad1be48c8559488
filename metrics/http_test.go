package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// /readyz says why it is not ready with the same redaction as the logs: a
// driver's error may quote the connection string it was given.
func TestReadyzRedactsPasswords(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, prometheus.NewRegistry(), func(context.Context, bool) error {
			return errors.New(`connect to postgres://relay:s3cr3t@db:5432/app?sslpassword=k3y failed: password=hunter2 refused`)
		}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	res, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), "not ready: connect to postgres://") {
		t.Fatalf("/readyz answered %d %q", res.StatusCode, body)
	}
	for _, secret := range []string{"s3cr3t", "k3y", "hunter2"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/readyz printed the secret %q: %s", secret, body)
		}
	}
}
