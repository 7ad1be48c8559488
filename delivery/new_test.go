package delivery

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// stubEnv is an Env exactly-once accepts, whose broker and Postgres funcs
// fail the test when called: a test replaces those it uses.
func stubEnv(t *testing.T) Env {
	return Env{
		Log: slog.New(slog.DiscardHandler),
		Connect: func() *producer.Cluster {
			t.Error("Env.Connect called")
			return nil
		},
		Identify: func(context.Context) (replication.System, error) {
			t.Error("Env.Identify called")
			return replication.System{}, errors.New("no server")
		},
		SlotPosition: func(context.Context) (pglogrepl.LSN, error) {
			t.Error("Env.SlotPosition called")
			return 0, errors.New("no server")
		},
		NextXid: func(context.Context) (uint64, error) {
			t.Error("Env.NextXid called")
			return 0, errors.New("no server")
		},
	}
}

// mustNew is New, failing the test on an error.
func mustNew(t *testing.T, cfg Config, env Env) Mode {
	t.Helper()
	m, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewRefusesWhatAModeLacks: exactly-once with an Env or Config that
// lacks a func it calls is an error naming the field, not a mode that
// panics when it first calls it; at-least-once calls none of them, and
// needs no Log.
func TestNewRefusesWhatAModeLacks(t *testing.T) {
	for _, tt := range []struct {
		name string
		mode Name
		lack func(*Config, *Env)
		want string // "": no error
	}{
		{"exactly once, all set", ExactlyOnce, func(*Config, *Env) {}, ""},
		{"exactly once without Connect", ExactlyOnce, func(_ *Config, e *Env) { e.Connect = nil }, "Env.Connect"},
		{"exactly once without Identify", ExactlyOnce, func(_ *Config, e *Env) { e.Identify = nil }, "Env.Identify"},
		{"exactly once without SlotPosition", ExactlyOnce, func(_ *Config, e *Env) { e.SlotPosition = nil }, "Env.SlotPosition"},
		{"exactly once without NextXid", ExactlyOnce, func(_ *Config, e *Env) { e.NextXid = nil }, "Env.NextXid"},
		{"exactly once without a transactional id", ExactlyOnce, func(c *Config, _ *Env) { c.TransactionalID = nil }, "Config.TransactionalID"},
		{"at least once, nothing set", AtLeastOnce, func(c *Config, e *Env) { *e = Env{}; c.TransactionalID = nil }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, env := testConfig(), stubEnv(t)
			cfg.Mode = tt.mode
			tt.lack(&cfg, &env)
			m, err := New(cfg, env)
			switch {
			case tt.want == "" && (err != nil || m == nil):
				t.Errorf("new: %v, %v; want a mode", m, err)
			case tt.want != "" && (err == nil || m != nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("new: %v, %v; want an error naming %s", m, err, tt.want)
			}
		})
	}
}
