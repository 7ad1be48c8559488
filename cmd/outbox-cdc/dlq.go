package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/dlq"
)

// dlqConfig is where cfg's dead-letter topic is.
func dlqConfig(cfg config.Config) (dlq.Config, error) {
	sec, err := cfg.Relay.Security()
	return dlq.Config{Brokers: cfg.Relay.Kafka.Brokers, Security: sec, Topic: cfg.Relay.Topics.DeadLetterTopic}, err
}

// dlqList runs `outbox-cdc dlq list`.
func dlqList(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	dc, err := dlqConfig(cfg)
	var entries []dlq.Entry
	if err == nil {
		entries, err = dlq.List(ctx, dc, cfg.DLQ)
	}
	switch {
	case err == nil && cfg.JSON:
		err = writeJSON(stdout, struct {
			Topic       string      `json:"topic"`
			DeadLetters []dlq.Entry `json:"dead_letters"`
		}{dc.Topic, append([]dlq.Entry{}, entries...)})
	case err == nil:
		dlq.WriteList(stdout, dc.Topic, entries)
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc dlq list: %s\n", red.oneLine(err))
		return exitFailure
	}
	return exitOK
}

// dlqReplay runs `outbox-cdc dlq replay`: exit 1 if any dead letter failed.
func dlqReplay(ctx context.Context, cfg config.Config, stdout, stderr io.Writer, red redactor) int {
	dc, err := dlqConfig(cfg)
	if err == nil {
		dc.Admission, err = cfg.Relay.Admission(nil) // as the run that wrote them admits topics
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc dlq replay: %s\n", red.oneLine(err))
		return exitFailure
	}
	rep, err := dlq.Replay(ctx, dc, cfg.DLQ, cfg.DLQReplay)
	if cfg.JSON {
		if jerr := writeJSON(stdout, rep); err == nil {
			err = jerr
		}
	} else {
		rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-cdc dlq replay: stopped: %s\n", red.oneLine(err))
	}
	if err != nil || rep.Failed > 0 {
		return exitFailure
	}
	return exitOK
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
