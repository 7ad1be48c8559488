package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// redactor blanks secrets (passwords) out of text bound for a log line or
// an error message: pgx and kafka-go errors may quote what they were given.
type redactor struct{ secrets []string }

const redacted = "xxxxx"

func newRedactor(secrets []string) redactor {
	var keep []string
	for _, s := range secrets {
		if s != "" {
			keep = append(keep, s)
		}
	}
	return redactor{secrets: keep}
}

func (r redactor) redact(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// oneLine is err's message on one line, redacted.
func (r redactor) oneLine(err error) string { return r.redact(checklist.OneLine(err)) }

// replaceAttr redacts every string, error and Stringer attribute, and the
// message.
func (r redactor) replaceAttr(_ []string, a slog.Attr) slog.Attr {
	if len(r.secrets) == 0 {
		return a
	}
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.redact(a.Value.String()))
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			a.Value = slog.StringValue(r.redact(v.Error()))
		case fmt.Stringer:
			a.Value = slog.StringValue(r.redact(v.String()))
		}
	}
	return a
}

func newLogger(format, level string, w io.Writer, red redactor) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // validated by config
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: red.replaceAttr}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
