package testkit

import (
	"net"
	"sync"
)

// Proxy is a loopback TCP proxy that can cut what passes through it, as a
// network fault would. Cut blackholes the open connections (bytes are read
// and dropped both ways, the sockets stay open, as when a firewall forgets a
// connection); Blackhole does that to new connections too, until Restore;
// CutResponses drops only what the server sends, on open and new
// connections until Restore (a request reaches the server, its answer is
// lost); Drop closes the open connections.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[*link]bool
	dark  bool // new connections are blackholed from the start
	mute  bool // new connections have their responses cut from the start
	wg    sync.WaitGroup
}

type link struct {
	client, server net.Conn
	mu             sync.Mutex
	blackholed     bool
	muted          bool // the server's bytes are dropped, the client's pass
}

// drops reports whether bytes read from the server (fromServer) or from
// the client are to be dropped.
func (l *link) drops(fromServer bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blackholed || fromServer && l.muted
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return ServeProxy(ln, target), nil
}

// ServeProxy forwards what ln accepts to target.
func ServeProxy(ln net.Listener, target string) *Proxy {
	p := &Proxy{ln: ln, target: target, conns: map[*link]bool{}}
	p.wg.Go(p.accept)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

func (p *Proxy) accept() {
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
		l.blackholed, l.muted = p.dark, p.mute
		p.conns[l] = true
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(l, c, s, false) })
		p.wg.Go(func() { p.pipe(l, s, c, true) })
	}
}

// pipe copies src (the server when fromServer) to dst until either closes,
// dropping what it reads while the link drops that direction.
func (p *Proxy) pipe(l *link, src, dst net.Conn, fromServer bool) {
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
		if n > 0 && !l.drops(fromServer) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut blackholes every open connection and returns how many.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.mu.Lock()
		l.blackholed = true
		l.mu.Unlock()
	}
	return len(p.conns)
}

// Blackhole cuts the open connections and every new one until Restore.
func (p *Proxy) Blackhole() int {
	p.mu.Lock()
	p.dark = true
	p.mu.Unlock()
	return p.Cut()
}

// CutResponses drops what the server sends on every open connection, and
// on new ones until Restore, while the client's requests still reach it:
// the server acts on a request whose answer never comes back, as when a
// connection dies after the request went out. It returns how many
// connections were open.
func (p *Proxy) CutResponses() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mute = true
	for l := range p.conns {
		l.mu.Lock()
		l.muted = true
		l.mu.Unlock()
	}
	return len(p.conns)
}

// Restore ends a Blackhole or CutResponses: new connections pass again; the
// open ones (cut) are closed, as a router's reset would, so clients
// reconnect.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.dark, p.mute = false, false
	p.mu.Unlock()
	p.Drop()
}

// Drop closes every open connection.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.client.Close()
		l.server.Close()
	}
}
