package replication

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pglogrepl"
)

// TestAlive: the receive loop comes round while it streams, while the
// server is silent and while a handler waits for room in a full window;
// it stops coming round when a status update cannot be written or a
// handler does not return at its deadline; Alive says so, and says the
// loop is not running once Run returned.
func TestAlive(t *testing.T) {
	const frozenFor = 10 * time.Second
	tests := []struct {
		name string
		// handle is the stream's handler; release ends whatever it or
		// the connection blocks on.
		handle func(release <-chan struct{}) Handler
		// act does what the test is about, on a running stream.
		act    func(h *harness) (release func())
		frozen bool
	}{
		{"idle, the server silent", nil, func(*harness) func() { return func() {} }, false},
		{"messages flowing", nil, func(h *harness) func() {
			for i := range 100 {
				h.conn.push(xlog(start+pglogrepl.LSN(i), []byte("I")))
			}
			return func() {}
		}, false},
		{"a handler waiting for room in the window", func(<-chan struct{}) Handler {
			return func(ctx context.Context, _ pglogrepl.LSN, _ []byte) error { <-ctx.Done(); return ctx.Err() }
		}, func(h *harness) func() { h.conn.push(xlog(start, []byte("I"))); return func() {} }, false},
		{"a handler that ignores its deadline", func(release <-chan struct{}) Handler {
			return func(context.Context, pglogrepl.LSN, []byte) error { <-release; return nil }
		}, func(h *harness) func() { h.conn.push(xlog(start, []byte("I"))); return func() {} }, true},
		{"a status update that cannot be written", nil, func(h *harness) func() {
			release := h.conn.stopReading()
			h.conn.push(keepalive(start, true)) // answered at once
			return release
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				released := make(chan struct{})
				var handle Handler
				if tt.handle != nil {
					handle = tt.handle(released)
				}
				cfg := testConfig()
				cfg.ReceiveTimeout = time.Minute // the silent server is not given up on meanwhile
				h := run(t, cfg, start, handle)
				h.conn.answerAsks()
				time.Sleep(time.Second)
				if at, ok := h.stream.Alive(); !ok || time.Since(at) > cfg.ConfirmEvery {
					t.Fatalf("before: loop last came round %s ago (running %v)", time.Since(at), ok)
				}
				release := tt.act(h)
				time.Sleep(frozenFor)
				at, ok := h.stream.Alive()
				if !ok {
					t.Fatal("Alive says the loop is not running")
				}
				if since := time.Since(at); (since >= frozenFor) != tt.frozen {
					t.Errorf("loop last came round %s ago; want frozen %v", since, tt.frozen)
				}
				release()
				close(released)
				if err := h.stop(); err != nil && err != context.Canceled {
					t.Errorf("Run: %v", err)
				}
				if _, ok := h.stream.Alive(); ok {
					t.Error("Alive says the loop runs after Run returned")
				}
			})
		})
	}
}

// TestAPeerThatStopsReadingEndsTheSession: a server that stops reading
// the replication connection (a hung walsender, a stalled proxy) while it
// asks for replies fills the socket buffers, and the status update's write
// blocks. The loop stops coming round (Alive, which the systemd watchdog
// reads), and the write gives up after ReceiveTimeout, ending the session
// (the relay reconnects) rather than hanging
// for good, SIGTERM included.
func TestAPeerThatStopsReadingEndsTheSession(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	var asking sync.WaitGroup
	defer asking.Wait()
	defer server.Close()
	asking.Go(func() { // keepalives asking for a reply, as fast as they go; nothing read
		ka, _ := keepalive(0, true).Encode(nil)
		batch := bytes.Repeat(ka, 1000)
		for {
			if _, err := server.Write(batch); err != nil {
				return
			}
		}
	})
	pc, err := pipeConn(client)
	if err != nil {
		t.Fatal(err)
	}
	progress := &fakeProgress{confirmed: start}
	cfg := testConfig()
	// The loop comes round at least every ConfirmEvery (100 ms) while it
	// is not stuck: a beat stale for stuck means the write blocks.
	cfg.ReceiveTimeout = 1500 * time.Millisecond
	const stuck = 500 * time.Millisecond
	s := newStream(cfg, pgConn{pc}, progress)
	s.streaming = true
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		done <- s.Run(context.Background(), func(context.Context, pglogrepl.LSN, []byte) error { return nil })
	}()

	deadline := time.Now().Add(20 * time.Second)
	for {
		at, ok := s.Alive()
		if ok && time.Since(at) > stuck {
			break // stuck in the write
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before its loop stopped coming round: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop still comes round %s ago after 20 s of a peer that reads nothing", time.Since(at))
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-done:
		// The write's timeout, or the silence it outlasted: either way
		// the session ends and the relay reconnects.
		if err == nil || !strings.Contains(err.Error(), "send standby status") && !errors.Is(err, ErrNoResponse) {
			t.Errorf("Run returned %v, want the failed status update or ErrNoResponse", err)
		}
		t.Logf("the session ended %s after it began", time.Since(began).Round(time.Millisecond))
	case <-time.After(3 * cfg.ReceiveTimeout):
		t.Errorf("Run still blocked %s after it began, with a peer that reads nothing: the status update's write has no bound", time.Since(began).Round(time.Second))
	}
}
