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

func TestSecretsAreRedactedFromLogs(t *testing.T) {
	const secret = "p@ss w0rd"
	red := newRedactor([]string{secret, "p%40ss+w0rd", ""})
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log := newLogger(format, "debug", &buf, red)
		err := fmt.Errorf("connect: %w", errors.New("bad url postgres://u:p%40ss+w0rd@h/db"))
		log.Info("message with "+secret, slog.String("s", "x"+secret), slog.Any("err", err),
			slog.Any("stringer", stringer(secret)), slog.Group("g", slog.String("nested", secret)))
		if strings.Contains(buf.String(), "p@ss") || strings.Contains(buf.String(), "p%40ss") {
			t.Errorf("%s log holds the secret: %s", format, buf.String())
		}
		if strings.Count(buf.String(), redacted) != 5 {
			t.Errorf("%s log: want 5 redactions: %s", format, buf.String())
		}
	}
	if got := red.oneLine(errors.New("a\nb " + secret)); got != "a; b "+redacted {
		t.Errorf("oneLine = %q", got)
	}
}
