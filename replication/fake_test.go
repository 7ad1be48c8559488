package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// errReadTimeout is what pgconn returns when a read deadline passes, made
// by pgconn itself: the stream recognizes it with pgconn.Timeout, whose
// error type is pgconn's own.
var errReadTimeout = readTimeout()

func readTimeout() error {
	client, server := net.Pipe()
	defer server.Close()
	defer client.Close()
	pc, err := pipeConn(client)
	if err != nil {
		panic(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(-time.Second))
	_, err = pc.ReceiveMessage(context.Background())
	if !pgconn.Timeout(err) {
		panic("a past read deadline did not make a pgconn timeout: " + err.Error())
	}
	return err
}

// pipeConn is a *pgconn.PgConn on c, as if connected and authenticated.
func pipeConn(c net.Conn) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig("postgres://test@localhost/test?sslmode=disable")
	if err != nil {
		return nil, err
	}
	return pgconn.Construct(&pgconn.HijackedConn{Conn: c, Config: cfg, TxStatus: 'I'})
}

// servedConn is a *pgconn.PgConn whose server is serve, run on the other
// end of a pipe; after serve the server reads whatever follows, so that
// the client never blocks on a write. The pipe closes when the test ends,
// which ends the server, and the test waits for it.
func servedConn(t *testing.T, serve func(b *pgproto3.Backend)) *pgconn.PgConn {
	t.Helper()
	client, server := net.Pipe()
	pc, err := pipeConn(client)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := pgproto3.NewBackend(server, server)
		serve(b)
		for _, err := b.Receive(); err == nil; _, err = b.Receive() {
		}
	}()
	t.Cleanup(func() {
		_ = server.Close()
		<-done
	})
	return pc
}

// fakeConn is a replication connection whose server is the test: it
// receives what the test pushes, honours read deadlines as a socket does, and
// records every status update as it would go on the wire.
type fakeConn struct {
	in       chan received
	progress *fakeProgress // to record what was confirmed when status was sent

	mu       sync.Mutex
	answer   bool // see answerAsks
	deadline time.Time
	moved    chan struct{} // closed when the deadline changes
	sent     []status
	closed   bool
	startErr error
	started  []string                       // START_REPLICATION plugin arguments
	system   pglogrepl.IdentifySystemResult // what IDENTIFY_SYSTEM answers
	history  []byte                         // what TIMELINE_HISTORY answers
	stuck    chan struct{}                  // set: status updates block until it is closed (a peer not reading)
}

type received struct {
	msg pgproto3.BackendMessage
	err error
}

// status is one standby status update as the server reads it, with the
// confirmed position at the time it was sent.
type status struct {
	at                  time.Time
	write, flush, apply pglogrepl.LSN
	reply               bool
	confirmed           pglogrepl.LSN
}

func newFakeConn(progress *fakeProgress) *fakeConn {
	return &fakeConn{in: make(chan received, 64), progress: progress, moved: make(chan struct{})}
}

func (f *fakeConn) push(msg pgproto3.BackendMessage) { f.in <- received{msg: msg} }

func (f *fakeConn) fail(err error) { f.in <- received{err: err} }

func (f *fakeConn) StartReplication(_ context.Context, _ string, _ pglogrepl.LSN, opts pglogrepl.StartReplicationOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = opts.PluginArgs
	return f.startErr
}

func (f *fakeConn) IdentifySystem(context.Context) (pglogrepl.IdentifySystemResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.system, nil
}

func (f *fakeConn) TimelineHistory(context.Context, int32) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.history, nil
}

func (f *fakeConn) ReceiveMessage(ctx context.Context) (pgproto3.BackendMessage, error) {
	for {
		f.mu.Lock()
		deadline, moved := f.deadline, f.moved
		f.mu.Unlock()
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil, errReadTimeout
		}
		if r, ok := f.receive(ctx, deadline, moved); ok {
			return r.msg, r.err
		}
	}
}

// receive waits for a message until deadline (none if zero) or until the
// deadline moves, which it reports with ok false.
func (f *fakeConn) receive(ctx context.Context, deadline time.Time, moved <-chan struct{}) (received, bool) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case r := <-f.in:
		return r, true
	case <-expired:
		return received{err: errReadTimeout}, true
	case <-moved:
		return received{}, false
	case <-ctx.Done():
		return received{err: ctx.Err()}, true
	}
}

func (f *fakeConn) SetReadDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = t
	close(f.moved)
	f.moved = make(chan struct{})
	return nil
}

// SendStandbyStatusUpdate records ssu as pglogrepl.SendStandbyStatusUpdate
// encodes it: a zero flush or apply position becomes the write position.
func (f *fakeConn) SendStandbyStatusUpdate(_ context.Context, ssu pglogrepl.StandbyStatusUpdate) error {
	if ssu.WALFlushPosition == 0 {
		ssu.WALFlushPosition = ssu.WALWritePosition
	}
	if ssu.WALApplyPosition == 0 {
		ssu.WALApplyPosition = ssu.WALWritePosition
	}
	f.mu.Lock()
	stuck := f.stuck
	f.mu.Unlock()
	if stuck != nil {
		<-stuck
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("fake connection closed")
	}
	f.sent = append(f.sent, status{
		at: time.Now(), write: ssu.WALWritePosition, flush: ssu.WALFlushPosition, apply: ssu.WALApplyPosition,
		reply: ssu.ReplyRequested, confirmed: f.progress.Confirmed(),
	})
	if ssu.ReplyRequested && f.answer {
		f.in <- received{msg: keepalive(ssu.WALWritePosition, false)}
	}
	return nil
}

func (f *fakeConn) IsClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func (f *fakeConn) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// answerAsks makes it answer each status update that asks for a reply with
// a keepalive, as a live walsender does.
func (f *fakeConn) answerAsks() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = true
}

// stopReading makes status updates block, as a write does once the peer
// stops reading and the socket buffers are full, until the returned func
// is called.
func (f *fakeConn) stopReading() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stuck = make(chan struct{})
	return sync.OnceFunc(func() { close(f.stuck) })
}

func (f *fakeConn) statuses() []status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// fakeProgress is a checkpoint whose confirmed position the test moves;
// ConfirmIdle moves it only when nothing is in flight, as checkpoint's does.
type fakeProgress struct {
	mu        sync.Mutex
	confirmed pglogrepl.LSN
	inFlight  bool
	idleCalls []pglogrepl.LSN
}

func (p *fakeProgress) Confirmed() pglogrepl.LSN {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.confirmed
}

func (p *fakeProgress) ConfirmIdle(end pglogrepl.LSN) pglogrepl.LSN {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idleCalls = append(p.idleCalls, end)
	if !p.inFlight && end > p.confirmed {
		p.confirmed = end
	}
	return p.confirmed
}

func (p *fakeProgress) setInFlight(inFlight bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight = inFlight
}

func (p *fakeProgress) confirm(lsn pglogrepl.LSN) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.confirmed = lsn
}

func (p *fakeProgress) idle() []pglogrepl.LSN {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.idleCalls)
}

// harness runs a Stream on a fakeConn inside a synctest bubble.
type harness struct {
	conn     *fakeConn
	progress *fakeProgress
	stream   *Stream
	begun    time.Time
	cancel   context.CancelFunc
	done     chan error
	once     sync.Once
	err      error
}

// testConfig is the configuration tests start from: a status deadline every
// 100 ms, a status update at least every 10 s, silence tolerated for 30 s.
// runReceiving runs a stream of testConfig with receive as its
// ReceiveTimeout, from start, without a handler.
func runReceiving(t *testing.T, receive time.Duration) *harness {
	t.Helper()
	cfg := testConfig()
	cfg.ReceiveTimeout = receive
	return run(t, cfg, start, nil)
}

func testConfig() StreamConfig {
	return StreamConfig{
		Slot: "outbox", Publication: "outbox", StatusInterval: 10 * time.Second,
		ConfirmEvery: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
}

// run starts streaming at start, with progress confirmed at start, and runs
// the stream with handle until it fails or the test ends. Call it inside
// synctest.Test.
func run(t *testing.T, cfg StreamConfig, start pglogrepl.LSN, handle Handler) *harness {
	t.Helper()
	progress := &fakeProgress{confirmed: start}
	h := &harness{conn: newFakeConn(progress), progress: progress, done: make(chan error, 1)}
	h.stream = newStream(cfg, h.conn, progress)
	if err := h.stream.Start(context.Background(), start); err != nil {
		t.Fatalf("start: %v", err)
	}
	if handle == nil {
		handle = func(context.Context, pglogrepl.LSN, []byte) error { return nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.begun = cancel, time.Now()
	go func() { h.done <- h.stream.Run(ctx, handle) }()
	t.Cleanup(func() {
		h.stop()
		checkFlushIsConfirmed(t, h.conn.statuses())
	})
	return h
}

// stop ends the stream if it still runs, and returns what Run returned.
func (h *harness) stop() error {
	h.cancel()
	return h.result()
}

func (h *harness) result() error {
	h.once.Do(func() { h.err = <-h.done })
	return h.err
}

// ended reports whether Run returned within wait, and what it returned.
func (h *harness) ended(wait time.Duration) (bool, error) {
	select {
	case err := <-h.done:
		h.once.Do(func() { h.err = err })
		return true, err
	case <-time.After(wait):
		return false, nil
	}
}

// checkFlushIsConfirmed checks every status update reported as flushed and
// applied exactly what Progress had confirmed: never the write position.
func checkFlushIsConfirmed(t *testing.T, sent []status) {
	t.Helper()
	for i, s := range sent {
		if s.flush != s.confirmed || s.apply != s.confirmed {
			t.Errorf("status %d: flush %s apply %s, confirmed was %s (write %s)", i, s.flush, s.apply, s.confirmed, s.write)
		}
	}
}

// xlog is an XLogData message ('w') carrying data from walStart.
func xlog(walStart pglogrepl.LSN, data []byte) *pgproto3.CopyData {
	b := []byte{pglogrepl.XLogDataByteID}
	b = binary.BigEndian.AppendUint64(b, uint64(walStart))
	b = binary.BigEndian.AppendUint64(b, uint64(walStart)+uint64(len(data))) // server WAL end
	b = binary.BigEndian.AppendUint64(b, 0)                                  // server time
	return &pgproto3.CopyData{Data: append(b, data...)}
}

// keepalive is a primary keepalive message ('k').
func keepalive(walEnd pglogrepl.LSN, reply bool) *pgproto3.CopyData {
	b := []byte{pglogrepl.PrimaryKeepaliveMessageByteID}
	b = binary.BigEndian.AppendUint64(b, uint64(walEnd))
	b = binary.BigEndian.AppendUint64(b, 0) // server time
	if reply {
		return &pgproto3.CopyData{Data: append(b, 1)}
	}
	return &pgproto3.CopyData{Data: append(b, 0)}
}
