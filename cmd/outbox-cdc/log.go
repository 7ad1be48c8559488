package main

import (
	"io"
	"log/slog"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
	"github.com/outbox-cdc/outbox-cdc/internal/redact"
)

// redactor blanks passwords out of what the commands print (see package
// redact): a URL's or a key=value password, found by where it stands.
type redactor struct{}

func newRedactor() redactor { return redactor{} }

func (redactor) redact(s string) string { return redact.String(s) }

// oneLine is err's message on one line, redacted, a relay setting in it
// named by its flag (config.Explain).
func (redactor) oneLine(err error) string {
	return redact.String(checklist.OneLine(config.Explain(err)))
}

func newLogger(format, level string, w io.Writer, _ redactor) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // validated by config
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: redact.ReplaceAttr}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
