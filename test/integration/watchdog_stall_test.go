package integration

import (
	"bytes"
	endian "encoding/binary"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// walProxy is a TCP proxy to Postgres that reads the protocol's framing
// of what the server sends, so that it can stall a replication
// connection the way a peer that stops reading does (a hung server or
// middlebox, a full path): it stops reading what the relay writes, and
// sends it keepalives that ask for a reply, as a walsender does. Each
// reply is a standby status update the relay writes; once the socket
// buffers between them are full, that write blocks, and the receive loop
// is stuck in it until --receive-timeout (30 s here) ends the session:
// far longer than the watchdog interval the test sets. Waiting for the relay's own status updates to fill the
// buffers would take hours (39 bytes each, megabytes of buffer); asking
// for replies fills them in a second or two.
//
// Connections use sslmode=disable (the package's Postgres URL does):
// every server message is then framed (a type byte and a length).
type walProxy struct {
	ln     net.Listener
	target string
	closed chan struct{}

	mu    sync.Mutex
	links []*walLink // every connection, closed by close
	repl  []*walLink // the replication connections, frozen by freeze
	wg    sync.WaitGroup
}

type walLink struct {
	closed         <-chan struct{} // the proxy's
	client, server net.Conn
	mu             sync.Mutex  // one whole message at a time to the client
	frozen         atomic.Bool // the client's bytes are no longer read; the server's dropped
	asked          atomic.Int64
}

// startWALProxy proxies pgURL's server; it returns pgURL through the
// proxy. It closes when the test ends.
func startWALProxy(t *testing.T, pgURL string) (*walProxy, string) {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &walProxy{ln: ln, target: u.Host, closed: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *walProxy) close() {
	close(p.closed)
	p.ln.Close()
	p.mu.Lock()
	for _, l := range p.links {
		l.client.Close()
		l.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *walProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve forwards one connection: the client's startup message, read
// whole, tells a replication connection from the others.
func (p *walProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return
	}
	startup := make([]byte, endian.BigEndian.Uint32(size[:]))
	copy(startup, size[:])
	if _, err := io.ReadFull(c, startup[4:]); err != nil {
		return
	}
	if _, err := s.Write(startup); err != nil {
		return
	}
	l := &walLink{closed: p.closed, client: c, server: s}
	p.mu.Lock()
	p.links = append(p.links, l)
	if bytes.Contains(startup, []byte("replication\x00database\x00")) {
		p.repl = append(p.repl, l)
	}
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Go(func() { l.fromClient(); s.Close() })
	both.Go(func() { l.fromServer(); c.Close() })
	both.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.links = slices.DeleteFunc(p.links, func(o *walLink) bool { return o == l })
	p.repl = slices.DeleteFunc(p.repl, func(o *walLink) bool { return o == l })
}

// fromClient forwards what the relay writes until the link is frozen;
// then it reads no more.
func (l *walLink) fromClient() {
	b := make([]byte, 32<<10)
	for !l.frozen.Load() {
		n, err := l.client.Read(b)
		if n > 0 && !l.frozen.Load() {
			if _, err := l.server.Write(b[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
	<-l.closed // the relay's writes pile up in the socket buffers
}

// fromServer forwards the server's messages whole, and drops them once
// the link is frozen.
func (l *walLink) fromServer() {
	var head [5]byte
	for {
		if _, err := io.ReadFull(l.server, head[:]); err != nil {
			return
		}
		msg := make([]byte, 1+endian.BigEndian.Uint32(head[1:]))
		copy(msg, head[:])
		if _, err := io.ReadFull(l.server, msg[5:]); err != nil {
			return
		}
		l.mu.Lock()
		var err error
		if !l.frozen.Load() {
			_, err = l.client.Write(msg)
		}
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// ask sends keepalives asking for a reply until a write fails (the
// proxy closed): once the relay no longer reads, the write blocks.
func (l *walLink) ask() {
	// CopyData ('d', length 22) of a primary keepalive ('k'): WAL end 0,
	// which confirms nothing, a send time, and reply requested.
	one := []byte{'d', 0, 0, 0, 22, 'k', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	batch := bytes.Repeat(one, 1000)
	for {
		l.mu.Lock()
		_, err := l.client.Write(batch)
		l.mu.Unlock()
		if err != nil {
			return
		}
		l.asked.Add(1000)
	}
}

// freeze stalls every open replication connection and returns how many.
func (p *walProxy) freeze() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.repl {
		l.mu.Lock() // at a message boundary
		l.frozen.Store(true)
		l.mu.Unlock()
		p.wg.Go(l.ask)
	}
	return len(p.repl)
}

// asked is how many keepalives the frozen connections were sent.
func (p *walProxy) asked() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, l := range p.repl {
		n += l.asked.Load()
	}
	return n
}

// TestWatchdogStopsWhenReplicationStalls: the relay's replication
// connection stalls as when its peer stops reading (see walProxy), and
// the receive loop blocks in a standby status update: the relay stops
// sending WATCHDOG=1, so that systemd would restart it after WatchdogSec,
// and says in its status which loop stalled. The process itself is
// alive: it is the loop the watchdog watches.
func TestWatchdogStopsWhenReplicationStalls(t *testing.T) {
	slowFault(t) // make test-faults (and .ci/run) runs it: make test stays under 10 minutes
	const watchdog = time.Second
	o := newOutbox(t, "sdstall", defaultColumns)
	p, proxied := startWALProxy(t, pg.URL)
	args := o.args()
	for i := range args {
		if args[i] == "--postgres-url" {
			args[i+1] = proxied
		}
	}
	n := listenNotify(t)
	r := startRelayWith(t, testkit.RelayCommand{Binary: fastBinary, Args: args, Env: n.env(watchdog), PostgresURL: pg.URL})
	ready := n.wait(t, r, "READY=1", time.Minute)
	time.Sleep(1500 * time.Millisecond)
	if pings := arrivedAfter(n.all("WATCHDOG=1"), ready.at); len(pings) < 2 {
		t.Fatalf("%d pings while streaming, want one every 500 ms:\n%s", len(pings), n.dump())
	}

	frozeAt := time.Now()
	if links := p.freeze(); links != 1 {
		t.Fatalf("%d replication connections through the proxy, want 1", links)
	}
	stalled := n.wait(t, r, "STATUS=stalled: the replication receive loop has not come round", 20*time.Second)
	time.Sleep(3 * watchdog)
	if late := arrivedAfter(n.all("WATCHDOG=1"), stalled.at); len(late) > 0 {
		t.Errorf("%d pings after the stall was reported, want none:\n%s", len(late), n.dump())
	}
	select {
	case <-r.done:
		t.Fatalf("the relay exited: %v", r.Err())
	default:
	}
	pings := n.all("WATCHDOG=1")
	t.Logf("stalled %s after the freeze (%d keepalives asked for a reply); the last ping %s after the freeze",
		stalled.at.Sub(frozeAt).Round(time.Millisecond), p.asked(), pings[len(pings)-1].at.Sub(frozeAt).Round(time.Millisecond))
}
