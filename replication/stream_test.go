package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Every test runs in a synctest bubble: time is fake, so intervals of
// seconds take none, and deadlines fall at exact instants.

const start = pglogrepl.LSN(0x16B3748)

var errBoom = errors.New("boom")

func TestKeepalive(t *testing.T) {
	const end = start + 0x400
	tests := []struct {
		name     string
		reply    bool
		inFlight bool
		atOnce   bool          // answered before the next status deadline
		flush    pglogrepl.LSN // reported flushed, at once or at the next deadline
	}{
		{"reply requested, idle", true, false, true, end},
		{"reply requested, events in flight", true, true, true, start},
		{"no reply requested, idle", false, false, false, end},
		{"no reply requested, events in flight", false, true, false, start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := run(t, testConfig(), start, nil)
				h.progress.setInFlight(tt.inFlight)
				time.Sleep(50 * time.Millisecond) // halfway to the first deadline
				h.conn.push(xlog(start+0x100, []byte("B")))
				h.conn.push(keepalive(end, tt.reply))
				synctest.Wait()
				sent := h.conn.statuses()
				if tt.atOnce != (len(sent) == 1) || len(sent) > 1 {
					t.Fatalf("%d status updates before the deadline, want answer at once %v", len(sent), tt.atOnce)
				}
				if tt.atOnce && (sent[0].at != h.begun.Add(50*time.Millisecond) || sent[0].reply) {
					t.Errorf("answer sent at %s, reply %v; want at once, asking nothing", sent[0].at.Sub(h.begun), sent[0].reply)
				}
				if idle := h.progress.idle(); !slices.Equal(idle, []pglogrepl.LSN{end}) {
					t.Errorf("ConfirmIdle called with %v, want the keepalive's WAL end %s", idle, end)
				}
				time.Sleep(100 * time.Millisecond) // past the next deadline
				synctest.Wait()
				sent = h.conn.statuses()
				if len(sent) == 0 {
					t.Fatal("no status update by the first deadline")
				}
				if last := sent[len(sent)-1]; last.flush != tt.flush || last.write != end {
					t.Errorf("reported write %s flush %s, want write %s flush %s", last.write, last.flush, end, tt.flush)
				}
			})
		})
	}
}

// TestStatusPositions covers pglogrepl's trap: a zero flush position is
// sent as the write position, so nothing confirmed must be sent as write 0.
func TestStatusPositions(t *testing.T) {
	tests := []struct {
		name               string
		confirmed          pglogrepl.LSN
		wantWrite, wantFlu pglogrepl.LSN
	}{
		{"nothing confirmed yet", 0, 0, 0},
		{"confirmed behind received", start - 0x100, start, start - 0x100},
		{"confirmed at received", start, start, start},
		{"confirmed past received (an idle keepalive's end)", start + 0x100, start + 0x100, start + 0x100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := run(t, testConfig(), start, nil)
				h.progress.confirm(tt.confirmed)
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				sent := h.conn.statuses()
				if len(sent) != 1 {
					t.Fatalf("%d status updates at the first deadline, want 1", len(sent))
				}
				if s := sent[0]; s.write != tt.wantWrite || s.flush != tt.wantFlu || s.apply != tt.wantFlu {
					t.Errorf("on the wire: write %s flush %s apply %s; want write %s, flush and apply %s",
						s.write, s.flush, s.apply, tt.wantWrite, tt.wantFlu)
				}
			})
		})
	}
}

// TestStatusSchedule runs an idle stream for a minute against a server that
// answers when asked: a status update goes out at least every
// StatusInterval, and a newly confirmed position within ConfirmEvery.
func TestStatusSchedule(t *testing.T) {
	tests := []struct {
		name    string
		receive time.Duration   // ReceiveTimeout
		chatter time.Duration   // the server sends a keepalive this often, unasked
		moves   []time.Duration // when the confirmed position advances
	}{
		{"idle", 0, 0, nil},
		{"server never silent", 0, 2 * time.Second, nil},
		{"confirmed position moves", 0, 0, []time.Duration{time.Second, 1250 * time.Millisecond, 5 * time.Second, 20 * time.Second}},
		{"ReceiveTimeout shorter than StatusInterval", 4 * time.Second, 0, []time.Duration{3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := runReceiving(t, tt.receive)
				cfg := testConfig()
				h.conn.answerAsks()
				var confirmed []pglogrepl.LSN
				for i, at := range tt.moves {
					time.Sleep(time.Until(h.begun.Add(at)))
					confirmed = append(confirmed, start+pglogrepl.LSN(i+1)*0x10)
					h.progress.confirm(confirmed[i])
				}
				for at := tt.chatter; tt.chatter > 0 && at < time.Minute; at += tt.chatter {
					time.Sleep(time.Until(h.begun.Add(at)))
					h.conn.push(keepalive(start, false))
				}
				if ended, err := h.ended(time.Until(h.begun.Add(time.Minute))); ended {
					t.Fatalf("stream ended: %v", err)
				}
				sent := h.conn.statuses()
				last := h.begun
				for _, s := range append(sent, status{at: time.Now()}) {
					if gap := s.at.Sub(last); gap > cfg.StatusInterval {
						t.Errorf("no status update for %s from %s, want one every %s", gap, last.Sub(h.begun), cfg.StatusInterval)
					}
					last = s.at
				}
				for i, at := range tt.moves {
					if !slices.ContainsFunc(sent, func(s status) bool {
						return s.flush == confirmed[i] && s.at.Sub(h.begun.Add(at)) <= cfg.ConfirmEvery
					}) {
						t.Errorf("%s confirmed at %s not reported within %s", confirmed[i], at, cfg.ConfirmEvery)
					}
				}
			})
		})
	}
}

// TestReceiveDeadline checks that a read deadline sends status if due and
// goes on reading.
func TestReceiveDeadline(t *testing.T) {
	tests := []struct {
		name string
		move bool // the confirmed position moves
		want int  // status updates over the next nine deadlines
	}{
		{"nothing due", false, 0},
		{"confirmed position moved", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []pglogrepl.LSN
				h := run(t, testConfig(), start, func(_ context.Context, lsn pglogrepl.LSN, _ []byte) error {
					got = append(got, lsn)
					return nil
				})
				time.Sleep(150 * time.Millisecond) // the first deadline reports start, never sent yet
				synctest.Wait()
				before := len(h.conn.statuses())
				if tt.move {
					h.progress.confirm(start + 0x10)
				}
				time.Sleep(900 * time.Millisecond)
				synctest.Wait()
				if n := len(h.conn.statuses()) - before; before != 1 || n != tt.want {
					t.Errorf("%d status updates at the first deadline, %d over the next nine; want 1 and %d", before, n, tt.want)
				}
				h.conn.push(xlog(start+0x20, []byte("I")))
				synctest.Wait()
				if !slices.Equal(got, []pglogrepl.LSN{start + 0x20}) {
					t.Errorf("after ten deadlines, handled %v; want the next message read", got)
				}
			})
		})
	}
}

func TestRunEnds(t *testing.T) {
	shutdown := &pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	tests := []struct {
		name    string
		receive time.Duration // ReceiveTimeout
		push    func(*harness)
		after   time.Duration // when Run returns
		check   func(*testing.T, error, *harness)
	}{
		{"ErrorResponse", 0, func(h *harness) { h.conn.push(shutdown) }, 0, func(t *testing.T, err error, _ *harness) {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != shutdown.Code || !strings.Contains(err.Error(), shutdown.Message) {
				t.Errorf("got %v, want the server's error", err)
			}
		}},
		{"CopyDone", 0, func(h *harness) { h.conn.push(&pgproto3.CopyDone{}) }, 0, func(t *testing.T, err error, _ *harness) {
			if err == nil || !strings.Contains(err.Error(), "server ended the stream") {
				t.Errorf("got %v, want the stream ended by the server", err)
			}
		}},
		{"connection lost", 0, func(h *harness) { h.conn.fail(io.ErrUnexpectedEOF) }, 0, func(t *testing.T, err error, _ *harness) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("got %v, want the receive error", err)
			}
		}},
		{"empty CopyData", 0, func(h *harness) { h.conn.push(&pgproto3.CopyData{}) }, 0, func(t *testing.T, err error, _ *harness) {
			if err == nil || !strings.Contains(err.Error(), "empty CopyData") {
				t.Errorf("got %v", err)
			}
		}},
		{"short XLogData", 0, func(h *harness) { h.conn.push(&pgproto3.CopyData{Data: []byte{'w', 0, 1}}) }, 0, func(t *testing.T, err error, _ *harness) {
			if err == nil || !strings.Contains(err.Error(), "parse XLogData") {
				t.Errorf("got %v", err)
			}
		}},
		{"silent server", 2 * time.Second, func(*harness) {}, 2 * time.Second, func(t *testing.T, err error, h *harness) {
			if !errors.Is(err, ErrNoResponse) {
				t.Errorf("got %v, want ErrNoResponse", err)
			}
			if !slices.ContainsFunc(h.conn.statuses(), func(s status) bool { return s.reply }) {
				t.Error("the stream never asked the silent server for a reply")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := runReceiving(t, tt.receive)
				tt.push(h)
				ended, err := h.ended(time.Minute)
				if !ended {
					t.Fatal("stream still running")
				}
				if at := time.Since(h.begun); at != tt.after {
					t.Errorf("Run returned after %s, want %s", at, tt.after)
				}
				tt.check(t, err, h)
			})
		})
	}
}

// TestHandlerResumes covers Handler's contract: an error returned after
// ctx's deadline means "call me again with the same message".
func TestHandlerResumes(t *testing.T) {
	tests := []struct {
		name     string
		block    time.Duration // the handler waits for ctx while this much time has not passed
		fail     error         // the handler fails at once
		cancelAt time.Duration // the stream's ctx ends
		wantErr  error         // nil: the stream still runs
		calls    int           // calls with the first message
	}{
		{"blocked past a status deadline", 50 * time.Millisecond, nil, 0, nil, 2},
		{"blocked past ReceiveTimeout", 40 * time.Second, nil, 0, nil, 401},
		{"fails before its deadline", 0, errBoom, 0, errBoom, 1},
		{"stream cancelled while blocked", time.Hour, nil, 50 * time.Millisecond, context.Canceled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var calls []string
				begun := time.Now()
				h := run(t, testConfig(), start, func(ctx context.Context, lsn pglogrepl.LSN, data []byte) error {
					mu.Lock()
					calls = append(calls, fmt.Sprintf("%s %s", lsn, data))
					mu.Unlock()
					if tt.fail != nil {
						return tt.fail
					}
					if time.Since(begun) < tt.block {
						<-ctx.Done()
						return fmt.Errorf("window full: %w", context.Cause(ctx))
					}
					return nil
				})
				h.conn.answerAsks()
				h.conn.push(xlog(start+0x10, []byte("first")))
				h.conn.push(xlog(start+0x20, []byte("next")))
				if tt.cancelAt > 0 {
					time.Sleep(tt.cancelAt)
					h.cancel()
				}
				ended, err := h.ended(time.Until(begun.Add(time.Minute)))
				if ended != (tt.wantErr != nil) || !errors.Is(err, tt.wantErr) {
					t.Fatalf("ended %v with %v, want %v", ended, err, tt.wantErr)
				}
				mu.Lock()
				defer mu.Unlock()
				want := slices.Repeat([]string{fmt.Sprintf("%s first", start+0x10)}, tt.calls)
				if tt.wantErr == nil {
					want = append(want, fmt.Sprintf("%s next", start+0x20))
				}
				if !slices.Equal(calls, want) {
					t.Errorf("handler calls: %d, first %q, last %q; want %d × %q then the next message",
						len(calls), calls[0], calls[len(calls)-1], tt.calls, want[0])
				}
				last := begun
				for _, s := range h.conn.statuses() {
					if s.at.Sub(last) > testConfig().StatusInterval {
						t.Errorf("no status update from %s to %s while the handler blocked", last.Sub(begun), s.at.Sub(begun))
					}
					last = s.at
				}
			})
		})
	}
}

func TestReceived(t *testing.T) {
	steps := []struct {
		msg  *pgproto3.CopyData
		want pglogrepl.LSN
	}{
		{xlog(start+0x100, []byte("B")), start + 0x100},
		{xlog(start+0x80, []byte("I")), start + 0x100}, // never backwards
		{keepalive(start+0x300, false), start + 0x300},
		{keepalive(start+0x200, false), start + 0x300},
		{xlog(start+0x400, []byte("C")), start + 0x400},
	}
	synctest.Test(t, func(t *testing.T) {
		h := run(t, testConfig(), start, nil)
		if got := h.stream.Received(); got != start {
			t.Errorf("after Start: Received %s, want %s", got, start)
		}
		for i, st := range steps {
			h.conn.push(st.msg)
			synctest.Wait()
			if got := h.stream.Received(); got != st.want {
				t.Errorf("step %d: Received %s, want %s", i, got, st.want)
			}
		}
	})
}
