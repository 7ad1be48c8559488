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
