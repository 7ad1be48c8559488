package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/internal/sdnotify"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// notifyOptions returns the option that tells systemd what the relay does
// (relay.WithNotifier) when systemd started it as a Type=notify unit
// ($NOTIFY_SOCKET set), with the watchdog its WatchdogSec= asks for
// ($WATCHDOG_USEC, for this process per $WATCHDOG_PID); none otherwise,
// at no cost. A variable that cannot be read is a warning, not a failure:
// the relay works without systemd being told, and the unit's start
// timeout says the rest.
func notifyOptions(environ []string, log *slog.Logger) []relay.Option {
	env := func(key string) string {
		for i := len(environ) - 1; i >= 0; i-- { // the last one wins, as in os.Getenv
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
				return v
			}
		}
		return ""
	}
	n, err := sdnotify.New(env("NOTIFY_SOCKET"))
	if err != nil {
		log.Warn("not telling systemd the relay's state", slog.Any("err", err))
		return nil
	}
	if !n.Enabled() {
		return nil
	}
	watchdog, err := sdnotify.Watchdog(env("WATCHDOG_USEC"), env("WATCHDOG_PID"), os.Getpid())
	if err != nil {
		log.Warn("no watchdog pings", slog.Any("err", err))
	}
	log.Debug("telling systemd the relay's state", slog.String("socket", env("NOTIFY_SOCKET")), slog.Duration("watchdog", watchdog))
	return []relay.Option{relay.WithNotifier(n, watchdog)}
}
