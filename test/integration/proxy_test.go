package integration

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a loopback TCP proxy that can cut the connections passing
// through it: cut blackholes them (bytes are read and dropped both ways, the
// sockets stay open, as when a firewall forgets a connection), drop closes
// them. New connections are forwarded normally either way.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[*link]bool
	wg    sync.WaitGroup
}

type link struct {
	client, server net.Conn
	mu             sync.Mutex
	blackholed     bool
}

func (l *link) isBlackholed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blackholed
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[*link]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.drop()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		p.conns[l] = true
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(l, c, s) })
		p.wg.Go(func() { p.pipe(l, s, c) })
	}
}

// pipe copies src to dst until either closes, dropping what it reads while
// the link is blackholed.
func (p *proxy) pipe(l *link, src, dst net.Conn) {
	defer func() {
		src.Close()
		dst.Close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.isBlackholed() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// cut blackholes every open connection and returns how many.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.mu.Lock()
		l.blackholed = true
		l.mu.Unlock()
	}
	return len(p.conns)
}

// drop closes every open connection.
func (p *proxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.client.Close()
		l.server.Close()
	}
}
