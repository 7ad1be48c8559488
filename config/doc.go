// Package config turns command-line flags and OUTBOX_CDC_* environment
// variables into one validated Config. It is parsed once in cmd/outbox-cdc;
// every other package receives only the fields it needs.
package config
