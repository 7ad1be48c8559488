// Package outagetest reads what a logger said of Kafka requests failing,
// for the tests of every room that reports them: each outage a warning
// naming the request and its error, then a line saying it recovered and
// after how long.
package outagetest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Log holds a logger's lines. Its zero value is ready.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Logger returns a logger writing to l, as JSON.
func (l *Log) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// Write appends p; it may be called from several goroutines.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Outage is one outage as the log should tell it: the request failing,
// and for at least how long.
type Outage struct {
	Request string
	Lasted  time.Duration
}

// Check checks that the log tells of want and nothing else at WARN or
// above, in order: each outage one warning naming its request and error,
// then one line saying it recovered, naming the request, after Lasted or
// a little more (less than 5 s more).
func (l *Log) Check(t testing.TB, want ...Outage) {
	t.Helper()
	var warned, recovered int
	for _, r := range l.records(t) {
		msg, _ := r["msg"].(string)
		var level slog.Level
		_ = level.UnmarshalText([]byte(r["level"].(string)))
		switch {
		case level >= slog.LevelWarn:
			warned++
			if warned > len(want) || warned != recovered+1 || r["request"] != want[warned-1].Request || r["err"] == nil {
				t.Errorf("warning %d: %v; want %v, each warned of once, naming its request and error", warned, r, want)
			}
		case level == slog.LevelInfo && strings.Contains(msg, "recovered"):
			recovered++
			after, _ := r["after"].(float64) // nanoseconds
			if recovered > len(want) || recovered != warned || r["request"] != want[recovered-1].Request ||
				time.Duration(after) < want[recovered-1].Lasted || time.Duration(after) > want[recovered-1].Lasted+5*time.Second {
				t.Errorf("recovery %d: %v; want %v, each recovered once after its warning, naming its request and how long it lasted", recovered, r, want)
			}
		}
	}
	if warned != len(want) || recovered != len(want) {
		t.Errorf("%d warnings and %d recoveries logged, want %d of each; the log:\n%s", warned, recovered, len(want), l)
	}
}

func (l *Log) records(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}
