package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// safeToRetry answers pgconn.SafeToRetry as pgx's own errors do.
type safeToRetry bool

func (s safeToRetry) Error() string     { return "pgconn error" }
func (s safeToRetry) SafeToRetry() bool { return bool(s) }

// connectError is a real *pgconn.ConnectError: nothing listens on port 1.
func connectError(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil {
		conn.Close(ctx)
		t.Fatal("connected to 127.0.0.1:1")
	}
	var connErr *pgconn.ConnectError
	if !errors.As(err, &connErr) {
		t.Fatalf("connect error is a %T, want *pgconn.ConnectError: %v", err, err)
	}
	return err
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"invalid row", &decode.InvalidRowError{Table: "public.outbox", Reason: decode.ReasonNullColumn}, Permanent},
		{"publish refused", &sink.Error{Topic: "t", Err: errors.New("invalid record"), Reason: sink.ReasonInvalidRecord}, Permanent},
		{"publish refused over a network error", &sink.Error{Err: io.ErrUnexpectedEOF}, Permanent},
		{"publish transient", &sink.Error{Topic: "t", Err: errors.New("leader moved"), Transient: true}, Transient},
		{"not ready", fmt.Errorf("%w: wal_level is replica", slot.ErrNotReady), Permanent},
		{"column missing", fmt.Errorf("%w: no column payload", slot.ErrColumnMissing), Permanent},
		{"slot invalidated", fmt.Errorf("%w: WAL removed", slot.ErrSlotInvalidated), Permanent},
		{"cleanup not ready", fmt.Errorf("%w: no unique index", cleanup.ErrNotReady), Permanent},
		{"not ready joined to a network error", errors.Join(io.EOF, fmt.Errorf("%w: gone", slot.ErrNotReady)), Permanent},
		{"slot active", fmt.Errorf("start replication: %w", replication.ErrSlotActive), Transient},
		{"no response", fmt.Errorf("stream: %w for 30s", replication.ErrNoResponse), Transient},
		{"connect error", connectError(t), Transient},
		{"safe to retry", safeToRetry(true), Transient},
		{"not safe to retry", safeToRetry(false), Unclassified},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, Transient},
		{"dns", &net.DNSError{Err: "no such host", Name: "db"}, Transient},
		{"eof", io.EOF, Transient},
		{"unexpected eof", io.ErrUnexpectedEOF, Transient},
		{"deadline", context.DeadlineExceeded, Transient},
		{"connection failure", &pgconn.PgError{Code: "08006"}, Transient},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, Transient},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, Transient},
		{"starting up", &pgconn.PgError{Code: "57P03"}, Transient},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, Transient},
		{"synchronized slot on a standby", &pgconn.PgError{Code: "55000"}, Transient},
		{"lock timeout", &pgconn.PgError{Code: "55P03"}, Transient},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, Transient},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, Transient},
		{"io error", &pgconn.PgError{Code: "58030"}, Transient},
		{"insufficient privilege", &pgconn.PgError{Code: "42501"}, Unclassified},
		{"too many connections", &pgconn.PgError{Code: "53300"}, Transient},
		{"disk full", &pgconn.PgError{Code: "53100"}, Transient},
		{"permission denied", &pgconn.PgError{Code: "42501"}, Unclassified},
		{"password refused outside a connect", &pgconn.PgError{Code: "28P01"}, Unclassified},
		{"canceled", context.Canceled, Unclassified},
		{"unknown", errors.New("something odd"), Unclassified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, err := range []error{tt.err, fmt.Errorf("session: %w", fmt.Errorf("stream: %w", tt.err))} {
				if got := Classify(err); got != tt.want {
					t.Errorf("Classify(%v) = %s, want %s", err, got, tt.want)
				}
			}
		})
	}
	if got := Classify(nil); got != Transient {
		t.Errorf("Classify(nil) = %s, want transient (a session that ended without a word)", got)
	}
}

// The sentinels that answer Retriable still match errors.Is, each itself
// only.
func TestSentinelsStillMatch(t *testing.T) {
	sentinels := []error{slot.ErrNotReady, slot.ErrColumnMissing, slot.ErrSlotInvalidated, slot.ErrNoSlot,
		cleanup.ErrNotReady, replication.ErrSlotActive, replication.ErrNoResponse}
	for i, s := range sentinels {
		wrapped := fmt.Errorf("context: %w", s)
		for j, other := range sentinels {
			if got := errors.Is(wrapped, other); got != (i == j) {
				t.Errorf("errors.Is(%q, %q) = %v", wrapped, other, got)
			}
		}
	}
}

func TestStreak(t *testing.T) {
	type failure struct {
		class    Class
		progress bool
	}
	unknown := failure{class: Unclassified}
	repeat := func(n int, f failure) []failure {
		fs := make([]failure, n)
		for i := range fs {
			fs[i] = f
		}
		return fs
	}
	then := func(parts ...[]failure) []failure {
		var fs []failure
		for _, p := range parts {
			fs = append(fs, p...)
		}
		return fs
	}
	tests := []struct {
		name     string
		failures []failure
		want     int // the streak after the last
	}{
		{"unclassified in a row", repeat(10, unknown), 10},
		{"transient for ever", repeat(100, failure{class: Transient}), 0},
		{"a transient one ends it", then(repeat(9, unknown), []failure{{class: Transient}}, repeat(3, unknown)), 3},
		{"a permanent one ends it", then(repeat(9, unknown), []failure{{class: Permanent}}, repeat(2, unknown)), 2},
		{"progress ends it", then(repeat(9, unknown), []failure{{Unclassified, true}}, repeat(4, unknown)), 4},
		{"progress each time", repeat(50, failure{Unclassified, true}), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Streak
			got := 0
			for _, f := range tt.failures {
				got = s.Add(f.class, f.progress)
			}
			if got != tt.want {
				t.Errorf("streak = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestInnermost(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("session: %w", fmt.Errorf("query: %w", &pgconn.PgError{Code: "42501"})), "*pgconn.PgError"},
		{errors.Join(fmt.Errorf("a: %w", syscall.EPIPE), errors.New("b")), "syscall.Errno"},
		{fmt.Errorf("%w: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, io.EOF), "syscall.Errno"},
		{errors.New("plain"), "*errors.errorString"},
	}
	for _, tt := range tests {
		if got := fmt.Sprintf("%T", Innermost(tt.err)); got != tt.want {
			t.Errorf("Innermost(%v) is a %s, want %s", tt.err, got, tt.want)
		}
	}
}
