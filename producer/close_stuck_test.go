package producer

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// stuckConn's writes block once armed (the peer stopped reading, send
// buffer full) until its write deadline or Close.
type stuckConn struct {
	net.Conn
	armed    *atomic.Bool
	mu       sync.Mutex
	deadline time.Time
	closed   chan struct{}
	once     sync.Once
}

func (c *stuckConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stuckConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *stuckConn) Write(b []byte) (int, error) {
	if !c.armed.Load() {
		return c.Conn.Write(b)
	}
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !d.IsZero() {
		timeout = time.After(time.Until(d))
	}
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	case <-timeout:
		return 0, context.DeadlineExceeded
	}
}

func (c *stuckConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestCloseWithWriteBlocked: Close(ctx) returns soon after ctx ends even
// when a produce request's write is blocked.
func TestCloseWithWriteBlocked(t *testing.T) {
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "stuck"))
	ctx, w, _ := keyedWriter(t, cluster, "stuck", 1, testConfig{BatchSize: 10})
	var armed atomic.Bool
	w.dialer.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stuckConn{Conn: nc, armed: &armed, closed: make(chan struct{})}, nil
	}
	publishKeyed(ctx, t, w, 1, 1)
	time.Sleep(300 * time.Millisecond)
	armed.Store(true)
	if err := w.Publish(ctx, keyedEvent(1, 1), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	closeCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Close(closeCtx)
	took := time.Since(start)
	t.Logf("Close took %s: %v", took, err)
	if took > 3*time.Second {
		t.Errorf("Close took %s, its context ended after 500ms", took)
	}
}
