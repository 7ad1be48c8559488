package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

type stringer string

func (s stringer) String() string { return string(s) }

// TestRedactByPosition: passwords are blanked where they stand (a URL's
// userinfo or query, a password= key), and nowhere else: a password that is
// also a word, or a letter, leaves the words that contain it alone, which
// would otherwise reveal it.
func TestRedactByPosition(t *testing.T) {
	const hint = "connect to postgres (is --postgres-url right?): failed to connect to `user=postgres database=app`: dial tcp: connection refused"
	tests := []struct {
		name, in, want string
	}{
		// The password is never searched for, so with "postgres", "e" or
		// "connect" as the password, words stay whole.
		{"no password position: words untouched", hint, hint},
		{"password postgres, in a URL",
			"cannot parse `postgres://postgres:postgres@db:5432/app?x=1`: bad", "cannot parse `postgres://postgres:xxxxx@db:5432/app?x=1`: bad"},
		{"one-letter password, in a URL", "url postgres://u:e@db/app: " + hint, "url postgres://u:xxxxx@db/app: " + hint},
		{"a common word, key=value",
			"cannot parse `host=db user=relay password=connect dbname=app`: " + hint,
			"cannot parse `host=db user=relay password=xxxxx dbname=app`: " + hint},
		{"URL-encoded",
			"bad url postgres://u:p%40ss+w0rd@db/app (p@ss elsewhere)", "bad url postgres://u:xxxxx@db/app (p@ss elsewhere)"},
		{"URL-encoded slash and space",
			"postgresql://u:a%2Fb%20c@db/app", "postgresql://u:xxxxx@db/app"},
		{"query password and sslpassword",
			"postgres://u@db/app?sslpassword=k3y&password=s3cret&sslmode=verify-full",
			"postgres://u@db/app?sslpassword=xxxxx&password=xxxxx&sslmode=verify-full"},
		{"multi-host URL",
			"postgres://u:pw1@h1:5432,h2:5433/app?target_session_attrs=primary", "postgres://u:xxxxx@h1:5432,h2:5433/app?target_session_attrs=primary"},
		{"quoted key=value",
			`host=db password='a \'quoted\' pw' sslpassword = k3y user=u`, `host=db password=xxxxx sslpassword=xxxxx user=u`},
		{"another scheme", "proxy http://u:hunter2@proxy:3128/ refused", "proxy http://u:xxxxx@proxy:3128/ refused"},
		{"SASL password that is a word",
			"kafka reachable: brokers kafka-0:9092", "kafka reachable: brokers kafka-0:9092"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newRedactor().redact(tt.in); got != tt.want {
				t.Errorf("redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLogsAreRedacted(t *testing.T) {
	const url = "postgres://relay:p%40ss+w0rd@db/app"
	red := newRedactor()
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log := newLogger(format, "debug", &buf, red)
		err := fmt.Errorf("connect: %w", errors.New("bad url "+url))
		log.Info("message with "+url, slog.String("s", "x "+url), slog.Any("err", err),
			slog.Any("stringer", stringer(url)), slog.Group("g", slog.String("nested", "password=p@ss")),
			slog.String("user", "relay"))
		if strings.Contains(buf.String(), "p%40ss") || strings.Contains(buf.String(), "p@ss") {
			t.Errorf("%s log holds the secret: %s", format, buf.String())
		}
		if n := strings.Count(buf.String(), "xxxxx"); n != 5 {
			t.Errorf("%s log: %d redactions, want 5: %s", format, n, buf.String())
		}
		if !strings.Contains(buf.String(), "relay") {
			t.Errorf("%s log lost the user name: %s", format, buf.String())
		}
	}
	if got := red.oneLine(errors.New("a\nb " + url)); got != "a; b postgres://relay:xxxxx@db/app" {
		t.Errorf("oneLine = %q", got)
	}
}
