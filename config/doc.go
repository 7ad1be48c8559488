// Package config turns a command line into one validated Config: its
// flags, the OUTBOX_CDC_* environment variables and the --config file
// (YAML or JSON) fill the same relay.Config, first found wins (flag,
// variable, file, default), and relay.Config.Validate judges it once.
// Each flag is declared once, with its doc, and takes its default from
// relay.Default; the file's keys and docs/config.schema.json follow the
// flags. cmd/outbox-cdc parses once; relay receives only relay.Config.
package config
